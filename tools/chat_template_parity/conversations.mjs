// Conversations rendered through the real chat templates. Each entry: [case name, context extras].
// generate.mjs adds bos_token/eos_token (from templates/sources.json), tools=null and documents=null
// unless given, the way transformers' apply_chat_template fills its render() call.

const SYS = { role: "system", content: "You are a helpful assistant." };
const U1 = { role: "user", content: "What is the capital of France?" };
const A1 = { role: "assistant", content: "The capital of France is Paris." };
const U2 = { role: "user", content: "And of Italy?" };
const A2 = { role: "assistant", content: "Rome." };

const UNICODE = { role: "user", content: "Grüße aus Köln! 你好，世界。Ελληνικά — naïve café ✓ 🎉🚀 \u00a0nbsp" };
const TRICKY = {
  role: "user",
  content:
    "He said \"hi\" and 'bye'.\nSecond line\twith tab\n\n{{ not a tag }} {% if x %} {# nor a comment #} \\ backslash </s> [INST] <|im_end|>\n",
};
const PADDED = { role: "user", content: "   padded question   \n" };

export const basic = [
  ["system_user", { messages: [SYS, U1], add_generation_prompt: true }],
  ["system_user_no_gen", { messages: [SYS, U1], add_generation_prompt: false }],
  ["user_only", { messages: [U1], add_generation_prompt: true }],
  ["user_only_no_gen", { messages: [U1], add_generation_prompt: false }],
  ["multi_turn", { messages: [U1, A1, U2], add_generation_prompt: true }],
  ["multi_turn_system", { messages: [SYS, U1, A1, U2], add_generation_prompt: true }],
  ["ends_with_assistant_no_gen", { messages: [U1, A1, U2, A2], add_generation_prompt: false }],
  ["unicode", { messages: [SYS, UNICODE], add_generation_prompt: true }],
  ["quotes_newlines_braces", { messages: [TRICKY, A1, PADDED], add_generation_prompt: true }],
];

// Conversations templates with a strict role order must refuse.
export const nonAlternating = [
  ["non_alternating_roles", { messages: [U1, U2], add_generation_prompt: true }],
  ["non_alternating_after_system", { messages: [SYS, U1, A1, A2], add_generation_prompt: true }],
];

export const badRole = [["tool_role_not_supported", { messages: [U1, { role: "tool", content: "42" }], add_generation_prompt: true }]];

// --- Qwen3 / Qwen2.5 specifics ------------------------------------------------------------
const TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Get the current weather for a city — «quoted» \"and\" escaped\\.",
      parameters: {
        type: "object",
        properties: {
          location: { type: "string", description: "City name, e.g. Zürich" },
          unit: { type: "string", enum: ["celsius", "fahrenheit"], default: "celsius" },
          days: { type: "integer", minimum: 1, maximum: 7 },
          detailed: { type: "boolean" },
          extra: { type: ["string", "null"], nullable: true, items: null },
        },
        required: ["location"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "search",
      description: "Search the web.",
      parameters: { type: "object", properties: { query: { type: "string" }, top_k: { type: "integer", default: 5 } }, required: ["query"] },
    },
  },
];

const TOOL_CALL_DICT = {
  role: "assistant",
  content: "",
  tool_calls: [{ type: "function", function: { name: "get_weather", arguments: { location: "Paris", unit: "celsius", days: 2 } } }],
};
const TOOL_CALL_TWO = {
  role: "assistant",
  content: "Let me check both.",
  tool_calls: [
    { type: "function", function: { name: "get_weather", arguments: { location: "Rome" } } },
    { name: "search", arguments: '{"query": "Rome events", "top_k": 3}' },
  ],
};
const TOOL_RESULT_1 = { role: "tool", content: '{"temperature": 21, "condition": "sunny"}' };
const TOOL_RESULT_2 = { role: "tool", content: "No events found." };

export const qwenTools = [
  ["tools_system_user", { messages: [SYS, U1], tools: TOOLS, add_generation_prompt: true }],
  ["tools_user_only", { messages: [U1], tools: TOOLS, add_generation_prompt: true }],
  [
    "tools_call_and_results",
    {
      messages: [SYS, U1, TOOL_CALL_DICT, TOOL_RESULT_1, { role: "assistant", content: "It is sunny and 21°C in Paris." }, U2, TOOL_CALL_TWO, TOOL_RESULT_1, TOOL_RESULT_2],
      tools: TOOLS,
      add_generation_prompt: true,
    },
  ],
];

export const qwen3Thinking = [
  [
    "think_in_history",
    {
      messages: [U1, { role: "assistant", content: "<think>\nThe user asks about France.\n</think>\n\nParis." }, U2],
      add_generation_prompt: true,
    },
  ],
  [
    "think_after_last_user",
    {
      messages: [U1, { role: "assistant", content: "<think>\nRecall geography.\n</think>\n\nParis." }],
      add_generation_prompt: false,
    },
  ],
  [
    "reasoning_content_field",
    {
      messages: [SYS, U1, { role: "assistant", content: "Paris.", reasoning_content: "\nCapital of France is Paris.\n" }],
      add_generation_prompt: false,
    },
  ],
  [
    "reasoning_content_none",
    { messages: [U1, { role: "assistant", content: "<think>x</think>Paris.", reasoning_content: null }], add_generation_prompt: false },
  ],
  ["enable_thinking_false", { messages: [SYS, U1], add_generation_prompt: true, enable_thinking: false }],
  ["enable_thinking_true", { messages: [U1], add_generation_prompt: true, enable_thinking: true }],
  [
    "tool_response_user_message",
    {
      messages: [
        U1,
        TOOL_CALL_DICT,
        { role: "user", content: "<tool_response>\n{\"temperature\": 21}\n</tool_response>" },
        { role: "assistant", content: "<think>\nuse it\n</think>\n\nSunny." },
      ],
      add_generation_prompt: false,
    },
  ],
];

export const deepseekTools = [
  [
    "tool_calls",
    {
      messages: [
        SYS,
        U1,
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { type: "function", function: { name: "get_weather", arguments: '{"location": "Paris"}' } },
            { type: "function", function: { name: "search", arguments: '{"query": "Paris"}' } },
          ],
        },
        TOOL_RESULT_1,
        TOOL_RESULT_2,
        { role: "assistant", content: "<think>\nsummarise\n</think>\n\nSunny, 21°C." },
        U2,
      ],
      add_generation_prompt: true,
    },
  ],
  ["two_system_messages", { messages: [SYS, { role: "system", content: "Answer briefly." }, U1], add_generation_prompt: true }],
];

export const emptyMessages = [["empty_messages", { messages: [], add_generation_prompt: true }]];

// --- Qwen3: thinking on and off over longer histories -----------------------------------------
const THINK_A1 = { role: "assistant", content: "<think>\nFrance's capital.\n</think>\n\nParis." };
const THINK_A2 = { role: "assistant", content: "<think>\nItaly's capital.\n</think>\n\nRome." };
const TOOL_CALL_REASONED = {
  role: "assistant",
  content: "I will look it up.",
  reasoning_content: "The user wants the weather; call the tool.",
  tool_calls: [{ type: "function", function: { name: "get_weather", arguments: { location: "Paris" } } }],
};

export const qwen3ThinkingMore = [
  ["enable_thinking_false_history", { messages: [SYS, U1, THINK_A1, U2], add_generation_prompt: true, enable_thinking: false }],
  ["enable_thinking_true_history", { messages: [SYS, U1, THINK_A1, U2], add_generation_prompt: true, enable_thinking: true }],
  ["enable_thinking_false_no_gen", { messages: [U1, THINK_A1], add_generation_prompt: false, enable_thinking: false }],
  ["think_two_turns_last_kept", { messages: [U1, THINK_A1, U2, THINK_A2], add_generation_prompt: false }],
  ["think_unclosed_tag", { messages: [U1, { role: "assistant", content: "<think>\nno closing tag\n\nParis." }], add_generation_prompt: false }],
  ["think_empty_block", { messages: [U1, { role: "assistant", content: "<think>\n\n</think>\n\nParis." }, U2], add_generation_prompt: true }],
  [
    "tools_reasoning_multi_step",
    {
      messages: [SYS, U1, TOOL_CALL_REASONED, TOOL_RESULT_1, TOOL_RESULT_2, { role: "assistant", content: "<think>\nsunny\n</think>\n\nSunny, 21°C." }],
      tools: TOOLS,
      add_generation_prompt: false,
    },
  ],
  [
    "tools_reasoning_pending",
    { messages: [U1, TOOL_CALL_REASONED, TOOL_RESULT_1], tools: TOOLS, add_generation_prompt: true, enable_thinking: false },
  ],
  [
    "tool_response_as_user_then_think",
    {
      messages: [
        SYS,
        U1,
        TOOL_CALL_DICT,
        { role: "user", content: "<tool_response>\n{\"temperature\": 21}\n</tool_response>" },
        { role: "assistant", content: "", reasoning_content: "Use the result." },
      ],
      add_generation_prompt: false,
    },
  ],
  ["system_mid_conversation", { messages: [U1, A1, { role: "system", content: "Be brief." }, U2], add_generation_prompt: true, enable_thinking: false }],
];

// --- gpt-oss (harmony): channels, developer message, reasoning effort, tools ----------------------
const HARMONY_TOOLS = [
  ...TOOLS,
  {
    type: "function",
    function: {
      name: "book_trip",
      description: "Book a trip.",
      parameters: {
        type: "object",
        properties: {
          cities: { type: "array", items: { type: "string" }, description: "Cities in order" },
          nights: { type: "array", items: { type: "integer" } },
          flags: { type: "array", items: { type: "boolean" }, nullable: true },
          legs: {
            type: "array",
            items: { type: "object", properties: { from: { type: "string" }, to: { type: "string" }, date: { type: "string" } }, required: ["from", "to"] },
          },
          anything: { type: "array" },
          budget: { type: "number", default: 1000.5 },
          currency: { type: "string", enum: ["EUR", "USD"], default: "EUR" },
          mode: { oneOf: [{ type: "string", description: "train or plane" }, { type: "integer", default: 1 }] },
          payer: { oneOf: [{ type: "object" }, { type: "string" }], default: "me" },
          traveller: { type: "object", properties: { name: { type: "string" }, age: { type: "integer" } }, required: ["name"] },
          note: { type: "string", nullable: true },
          either: { type: ["string", "number"] },
          one: { type: ["boolean"] },
        },
        required: ["cities", "legs"],
      },
    },
  },
  { type: "function", function: { name: "get_time", description: "Current time.", parameters: { type: "object", properties: {} } } },
  { type: "function", function: { name: "ping", description: "No parameters at all." } },
];
const HARMONY_CALL = {
  role: "assistant",
  thinking: "Need the weather; call get_weather.",
  tool_calls: [{ type: "function", function: { name: "get_weather", arguments: { location: "Paris", unit: "celsius" } } }],
};
const HARMONY_CALL_CONTENT = {
  role: "assistant",
  content: "Checking the calendar first.",
  tool_calls: [{ name: "get_time", arguments: "{}" }],
};
const HARMONY_RESULT = { role: "tool", content: '{"temperature": 21, "condition": "sunny"}' };
const DEV = { role: "developer", content: "Answer in one word." };

export const gptOss = [
  ["thinking_last_assistant_no_gen", { messages: [U1, { role: "assistant", thinking: "Recall: Paris.", content: "Paris." }], add_generation_prompt: false }],
  ["thinking_in_history_dropped", { messages: [U1, { role: "assistant", thinking: "Recall: Paris.", content: "Paris." }, U2], add_generation_prompt: true }],
  ["developer_first", { messages: [DEV, U1], add_generation_prompt: true }],
  ["reasoning_effort_high", { messages: [SYS, U1], add_generation_prompt: true, reasoning_effort: "high" }],
  ["reasoning_effort_low_identity", { messages: [U1], add_generation_prompt: true, reasoning_effort: "low", model_identity: "You are Colibri's test assistant." }],
  ["builtin_tools", { messages: [U1], add_generation_prompt: true, builtin_tools: ["browser", "python"] }],
  ["builtin_python_only", { messages: [SYS, U1], add_generation_prompt: true, builtin_tools: ["python"] }],
  ["tools_definitions", { messages: [SYS, U1], tools: HARMONY_TOOLS, add_generation_prompt: true }],
  ["tools_no_system", { messages: [U1], tools: TOOLS, add_generation_prompt: true }],
  ["tool_call_pending", { messages: [SYS, U1, HARMONY_CALL, HARMONY_RESULT], tools: HARMONY_TOOLS, add_generation_prompt: true }],
  [
    "tool_call_then_final",
    { messages: [U1, HARMONY_CALL, HARMONY_RESULT, { role: "assistant", content: "Sunny, 21°C." }, U2], tools: TOOLS, add_generation_prompt: true },
  ],
  ["tool_call_content_as_analysis", { messages: [U1, HARMONY_CALL_CONTENT, { role: "tool", content: "09:30" }], tools: HARMONY_TOOLS, add_generation_prompt: true }],
  [
    "tool_call_string_arguments",
    {
      messages: [U1, { role: "assistant", tool_calls: [{ type: "function", function: { name: "search", arguments: '{"query": "Paris"}' } }] }, { role: "tool", content: "Found." }],
      tools: TOOLS,
      add_generation_prompt: true,
    },
  ],
  ["channel_tags_in_content", { messages: [U1, { role: "assistant", content: "<|channel|>final<|message|>Paris." }], add_generation_prompt: true }],
  ["channel_tags_in_thinking", { messages: [U1, { role: "assistant", content: "Paris.", thinking: "<|channel|>analysis<|message|>hm" }], add_generation_prompt: true }],
  ["tool_without_call", { messages: [U1, { role: "tool", content: "42" }], add_generation_prompt: true }],
  [
    "tool_call_content_and_thinking",
    { messages: [U1, { ...HARMONY_CALL, content: "also content" }, HARMONY_RESULT], tools: TOOLS, add_generation_prompt: true },
  ],
];

// --- DeepSeek-V3 / V3.1: tool calls, <think> handling, thinking on and off ------------------------
const DS_CALLS = {
  role: "assistant",
  content: null,
  tool_calls: [
    { type: "function", function: { name: "get_weather", arguments: '{"location": "Paris"}' } },
    { type: "function", function: { name: "search", arguments: '{"query": "Paris"}' } },
  ],
};

export const deepseekV3 = [
  ["tool_result_then_answer", { messages: [U1, DS_CALLS, TOOL_RESULT_1, TOOL_RESULT_2, { role: "assistant", content: "Sunny." }], add_generation_prompt: false }],
  ["tool_result_pending", { messages: [SYS, U1, DS_CALLS, TOOL_RESULT_1], add_generation_prompt: true }],
  ["single_tool_call", { messages: [U1, { ...DS_CALLS, tool_calls: DS_CALLS.tool_calls.slice(0, 1) }, TOOL_RESULT_1], add_generation_prompt: true }],
  ["no_add_generation_prompt_key", { messages: [SYS, U1] }],
];

const V31_CALL = {
  role: "assistant",
  content: "",
  tool_calls: [
    { type: "function", function: { name: "get_weather", arguments: '{"location": "Paris"}' } },
    { type: "function", function: { name: "search", arguments: '{"query": "Paris"}' } },
  ],
};

export const deepseekV31 = [
  // The template concatenates arguments as text (OpenAI-style JSON strings): a dict is a TypeError in jinja2.
  ["tool_call_dict_arguments", { messages: [U1, { role: "assistant", content: "", tool_calls: [{ type: "function", function: { name: "f", arguments: { a: 1 } } }] }], add_generation_prompt: false }],
  ["thinking_true", { messages: [SYS, U1], add_generation_prompt: true, thinking: true }],
  ["thinking_false", { messages: [SYS, U1], add_generation_prompt: true, thinking: false }],
  ["think_stripped_from_history", { messages: [U1, { role: "assistant", content: "<think>\nrecall\n</think>\n\nParis." }, U2], add_generation_prompt: true, thinking: true }],
  ["prefix_with_thinking", { messages: [U1, { role: "assistant", content: "The answer", prefix: true }], add_generation_prompt: false, thinking: true }],
  ["tool_calls_thinking", { messages: [SYS, U1, V31_CALL, TOOL_RESULT_1, TOOL_RESULT_2, { role: "assistant", content: "Sunny." }, U2], add_generation_prompt: true, thinking: true }],
  ["tool_calls_with_content", { messages: [U1, { ...V31_CALL, content: "Let me check." }, TOOL_RESULT_1], add_generation_prompt: true }],
];

// --- GLM-4.5 / 4.6 (glm4_moe): thinking on and off, XML-style tool calls -------------------------
const GLM_CALL = {
  role: "assistant",
  content: "",
  reasoning_content: "Need the weather.",
  tool_calls: [
    { type: "function", function: { name: "get_weather", arguments: { location: "Paris", days: 3, detailed: true, extra: null, unit: "celsius" } } },
    { name: "search", arguments: { query: "Paris «events»", filters: ["today", 2] } },
  ],
};

export const glm = [
  ["thinking_off", { messages: [SYS, U1], add_generation_prompt: true, enable_thinking: false }],
  ["thinking_on", { messages: [SYS, U1], add_generation_prompt: true, enable_thinking: true }],
  ["thinking_off_nothink_already", { messages: [{ role: "user", content: "Quick one /nothink" }], add_generation_prompt: true, enable_thinking: false }],
  ["thinking_off_history", { messages: [U1, THINK_A1, U2], add_generation_prompt: true, enable_thinking: false }],
  ["reasoning_content_last_kept", { messages: [U1, { role: "assistant", reasoning_content: "  Recall: Paris.\n", content: "\nParis.  " }], add_generation_prompt: false }],
  ["think_history_dropped", { messages: [U1, THINK_A1, U2, THINK_A2], add_generation_prompt: false }],
  ["tools_definitions", { messages: [SYS, U1], tools: TOOLS, add_generation_prompt: true }],
  ["tool_calls_then_results", { messages: [U1, GLM_CALL, TOOL_RESULT_1, TOOL_RESULT_2, { role: "assistant", content: "Sunny." }, U2], tools: TOOLS, add_generation_prompt: true }],
  ["tool_call_no_arguments", { messages: [U1, { role: "assistant", content: "Checking.", tool_calls: [{ type: "function", function: { name: "get_time" } }] }], add_generation_prompt: false }],
  // llama.cpp's copy refuses arguments that are not a mapping (an OpenAI-style JSON string).
  ["tool_call_string_arguments", { messages: [U1, { role: "assistant", content: "", tool_calls: [{ type: "function", function: { name: "f", arguments: '{"a": 1}' } }] }], add_generation_prompt: false }],
  ["tool_content_list", { messages: [U1, TOOL_CALL_DICT, { role: "tool", content: [{ output: "21 degrees" }, "bare item"] }], add_generation_prompt: true }],
  ["content_parts", { messages: [{ role: "user", content: [{ type: "text", text: "What is " }, { type: "image" }, "the capital?"] }, { role: "assistant", content: [{ type: "text", text: "Paris." }] }], add_generation_prompt: false }],
  ["system_mid_conversation", { messages: [U1, A1, { role: "system", content: "Be brief." }, U2], add_generation_prompt: true }],
];
