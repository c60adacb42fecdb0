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

// --- The MoE families of late 2026 (issue 33): Qwen3.5, MiniMax-M2, GLM-4.7-Flash, Kimi-K2 --------------
// Shared material: an agent session with a coding tool and a weather tool, results as text and as parts.
const AGENT_TOOLS = [
  ...TOOLS,
  {
    type: "function",
    function: {
      name: "run_shell",
      description: "Run a shell command in the sandbox and return its output.",
      parameters: {
        type: "object",
        properties: {
          command: { type: "string", description: "The command line, e.g. `ls -la | grep \"*.cpp\"`" },
          timeout_s: { type: "number", default: 30.5 },
          env: { type: "object", additionalProperties: { type: "string" } },
          args: { type: "array", items: { type: "string" } },
        },
        required: ["command"],
      },
    },
  },
];
const WEATHER_Q = { role: "user", content: "What's the weather in Paris for the next 3 days? Give it in °C." };
const CODE_Q = { role: "user", content: "Count the C++ files under src/ and tell me the largest one." };
// Arguments as a mapping, with every JSON type the templates print differently (string, int, float, bool, null, list, dict).
const CALL_WEATHER = {
  role: "assistant",
  content: "",
  tool_calls: [{ id: "call_0", type: "function", function: { name: "get_weather", arguments: { location: "Paris", unit: "celsius", days: 3 } } }],
};
const CALL_SHELL_RICH = {
  role: "assistant",
  content: "I'll list the files first.",
  reasoning_content: "The user wants a count and the largest file.\nA shell pipeline does both.",
  tool_calls: [
    {
      id: "call_1",
      type: "function",
      function: {
        name: "run_shell",
        arguments: { command: "find src -name '*.cpp' | xargs wc -c | sort -n", timeout_s: 12.5, env: { LC_ALL: "C", "ünï": "✓" }, args: ["-v", "--color=never"], verbose: true, limit: null },
      },
    },
  ],
};
const CALL_TWO = {
  role: "assistant",
  content: null,
  reasoning_content: "Two lookups are independent; issue both.",
  tool_calls: [
    { id: "call_2", type: "function", function: { name: "get_weather", arguments: { location: "Rome", days: 1 } } },
    { id: "call_3", type: "function", function: { name: "search", arguments: { query: "Rome events «today»", top_k: 3 } } },
  ],
};
const RESULT_WEATHER = { role: "tool", tool_call_id: "call_0", name: "get_weather", content: '{"days": [{"max": 21, "min": 12, "sky": "sunny"}, {"max": 19, "min": 11, "sky": "cloudy"}, {"max": 17, "min": 10, "sky": "rain"}]}' };
const RESULT_SHELL = { role: "tool", tool_call_id: "call_1", name: "run_shell", content: "  1204 src/a.cpp\n  9981 src/engine/big.cpp\n 11185 total\n" };
const RESULT_ROME = { role: "tool", tool_call_id: "call_2", name: "get_weather", content: '{"max": 24, "sky": "sunny"}' };
const RESULT_EVENTS = { role: "tool", tool_call_id: "call_3", name: "search", content: "1. Opera at the Baths of Caracalla\n2. Jazz in Trastevere" };
const ANSWER_WEATHER = { role: "assistant", content: "Paris: 21°C and sunny, then 19°C cloudy, then 17°C with rain." };
const ANSWER_SHELL = { role: "assistant", content: "<think>\nTwo files; big.cpp is larger.\n</think>\n\nThere are 2 C++ files; the largest is src/engine/big.cpp (9,981 bytes)." };
const THINKING_TURN = { role: "assistant", content: "Paris.", reasoning_content: "France's capital is Paris; answer briefly." };
const PARTS_USER = {
  role: "user",
  content: [
    { type: "text", text: "Describe this picture:" },
    { type: "image", image: "file:///tmp/cat.png" },
    { type: "text", text: " and this clip:" },
    { type: "video", video: "file:///tmp/clip.mp4" },
    { type: "text", text: " briefly." },
  ],
};
const PARTS_ASSISTANT = { role: "assistant", content: [{ type: "text", text: "A cat on a sofa; " }, { type: "text", text: "the clip shows it jumping." }] };
const SYS_PARTS = { role: "system", content: [{ type: "text", text: "You are a careful assistant.  " }, { type: "text", text: "Answer in English." }] };

// Qwen3.5 (Qwen3.5-35B-A3B's family): <think> after the last query, XML-style <function=...> tool calls, vision parts.
export const qwen35 = [
  ["thinking_off", { messages: [SYS, U1], add_generation_prompt: true, enable_thinking: false }],
  ["thinking_on", { messages: [SYS, U1], add_generation_prompt: true, enable_thinking: true }],
  ["thinking_history_dropped", { messages: [SYS, U1, THINK_A1, U2, THINK_A2], add_generation_prompt: false }],
  ["reasoning_content_after_last_query", { messages: [U1, A1, U2, { role: "assistant", content: "Rome.", reasoning_content: "\n  Italy → Rome.\n\n" }], add_generation_prompt: false }],
  ["reasoning_content_not_string", { messages: [U1, { role: "assistant", content: "<think>kept from content</think>\n\nParis.", reasoning_content: null }], add_generation_prompt: false }],
  ["think_unclosed", { messages: [U1, { role: "assistant", content: "<think>\nno end tag\nParis." }], add_generation_prompt: false }],
  ["tools_with_system", { messages: [SYS, WEATHER_Q], tools: AGENT_TOOLS, add_generation_prompt: true }],
  ["tools_with_system_parts", { messages: [SYS_PARTS, WEATHER_Q], tools: TOOLS, add_generation_prompt: true }],
  ["tools_with_empty_system", { messages: [{ role: "system", content: "   " }, WEATHER_Q], tools: TOOLS, add_generation_prompt: true }],
  ["tools_no_system", { messages: [WEATHER_Q], tools: AGENT_TOOLS, add_generation_prompt: true, enable_thinking: false }],
  ["tool_call_pending", { messages: [SYS, WEATHER_Q, CALL_WEATHER, RESULT_WEATHER], tools: AGENT_TOOLS, add_generation_prompt: true }],
  ["tool_call_then_answer", { messages: [SYS, WEATHER_Q, CALL_WEATHER, RESULT_WEATHER, ANSWER_WEATHER, U2], tools: AGENT_TOOLS, add_generation_prompt: true }],
  ["tool_call_rich_arguments", { messages: [CODE_Q, CALL_SHELL_RICH, RESULT_SHELL, ANSWER_SHELL], tools: AGENT_TOOLS, add_generation_prompt: false }],
  ["parallel_calls_and_results", { messages: [SYS, { role: "user", content: "Weather and events in Rome today?" }, CALL_TWO, RESULT_ROME, RESULT_EVENTS], tools: AGENT_TOOLS, add_generation_prompt: true }],
  ["multi_step_agent", { messages: [SYS, CODE_Q, CALL_SHELL_RICH, RESULT_SHELL, CALL_TWO, RESULT_ROME, RESULT_EVENTS, ANSWER_SHELL, WEATHER_Q, CALL_WEATHER, RESULT_WEATHER], tools: AGENT_TOOLS, add_generation_prompt: true }],
  ["tool_call_flat_form", { messages: [U1, { role: "assistant", content: "Looking.", tool_calls: [{ name: "search", arguments: { query: "capital of France" } }] }, { role: "tool", content: "Paris" }], add_generation_prompt: true }],
  ["tool_call_without_arguments", { messages: [U1, { role: "assistant", content: "", tool_calls: [{ type: "function", function: { name: "get_time" } }] }, { role: "tool", content: "09:30" }], add_generation_prompt: true }],
  // An OpenAI-style JSON string is no mapping: the items filter refuses it (jinja2: TypeError).
  ["tool_call_string_arguments", { messages: [U1, { role: "assistant", content: "", tool_calls: [{ type: "function", function: { name: "search", arguments: '{"query": "Paris"}' } }] }], add_generation_prompt: false }],
  ["tool_response_as_user", { messages: [U1, CALL_WEATHER, { role: "user", content: "<tool_response>\n{\"max\": 21}\n</tool_response>" }, { role: "assistant", content: "", reasoning_content: "Use it." }], add_generation_prompt: false }],
  ["content_parts_vision", { messages: [SYS, PARTS_USER, PARTS_ASSISTANT, { role: "user", content: [{ type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } }, { type: "text", text: "And this one?" }] }], add_generation_prompt: true }],
  ["content_parts_vision_ids", { messages: [PARTS_USER, PARTS_ASSISTANT, { role: "user", content: [{ type: "image" }, { type: "image" }, { type: "video" }, { type: "text", text: "Compare." }] }], add_generation_prompt: true, add_vision_id: true }],
  ["content_none_assistant", { messages: [U1, { role: "assistant", content: null }, U2], add_generation_prompt: true }],
  // A bare string in a content list meets the template's substring tests: 'text' in "context text" is true, so it
  // prints item.text (undefined: nothing); "hello" matches nothing and is refused.
  ["content_list_bare_strings", { messages: [{ role: "user", content: [{ type: "text", text: "Read:" }, "some context text"] }], add_generation_prompt: true }],
  ["error_content_list_bare_word", { messages: [{ role: "user", content: ["hello"] }], add_generation_prompt: true }],
  // |trim and .strip() remove Python's whitespace (NBSP, ideographic space, U+001F, U+0085), not only ASCII.
  ["unicode_whitespace_trimmed", { messages: [{ role: "system", content: "\u3000System\u00a0\n" }, { role: "user", content: "\u2003\u00a0 question?\u3000\n\u001f\u0085" }, { role: "assistant", content: "\u00a0<think>\u2028why\u2028</think>\u00a0answer\u3000" }], add_generation_prompt: false }],
  // Arguments printed with |string (Python str: 1e-07, 1e+21, True, None) and lists/dicts with |tojson.
  ["tool_call_number_forms", {
    messages: [U1, { role: "assistant", content: "", tool_calls: [{ type: "function", function: { name: "tune", arguments: { small: 1e-7, huge: 1e21, ratio: 0.1, neg: -2.5, big_int: 9007199254740991, flag: false, nothing: null, nested: { "ключ": [1.5, "два", null, true], q: "it's \"x\"" }, text: "line1\nline2 «ü»" } } }] }, { role: "tool", content: "ok" }],
    add_generation_prompt: true,
  }],
  ["unicode_and_tags_in_content", { messages: [SYS, UNICODE, { role: "assistant", content: "Literal <tool_call> and </think> in text." }, TRICKY], add_generation_prompt: true }],
  // The template's own refusals (raise_exception).
  ["error_system_image", { messages: [{ role: "system", content: [{ type: "image" }] }, U1], add_generation_prompt: true }],
  ["error_system_video", { messages: [{ role: "system", content: [{ type: "video" }] }, U1], tools: TOOLS, add_generation_prompt: true }],
  ["error_unexpected_item", { messages: [{ role: "user", content: [{ type: "audio", audio: "x.wav" }] }], add_generation_prompt: true }],
  ["error_unexpected_content_type", { messages: [{ role: "user", content: 42 }], add_generation_prompt: true }],
  ["error_system_not_first", { messages: [U1, A1, { role: "system", content: "Be brief." }, U2], add_generation_prompt: true }],
  ["error_no_user_query", { messages: [SYS, { role: "user", content: "<tool_response>\n42\n</tool_response>" }], add_generation_prompt: true }],
  ["error_unknown_role", { messages: [U1, { role: "developer", content: "x" }], add_generation_prompt: true }],
];

// MiniMax-M2: ]~b] role markers, <minimax:tool_call> XML, reasoning kept only after the last user turn.
export const minimaxM2 = [
  ["system_with_date_and_location", { messages: [{ role: "system", content: "You are MiniMax-M2.", current_date: "2025-11-03", current_location: "Shanghai, China" }, U1], add_generation_prompt: true }],
  ["model_identity_given", { messages: [U1], add_generation_prompt: true, model_identity: "You are Colibri's test assistant." }],
  ["system_empty_content", { messages: [{ role: "system", content: "" }, U1], add_generation_prompt: true }],
  ["system_parts", { messages: [SYS_PARTS, U1], add_generation_prompt: true }],
  ["tools_definitions", { messages: [SYS, WEATHER_Q], tools: AGENT_TOOLS, add_generation_prompt: true }],
  ["tool_call_pending", { messages: [SYS, WEATHER_Q, CALL_WEATHER, RESULT_WEATHER], tools: AGENT_TOOLS, add_generation_prompt: true }],
  ["tool_call_rich_arguments", { messages: [CODE_Q, CALL_SHELL_RICH, RESULT_SHELL, ANSWER_SHELL], tools: AGENT_TOOLS, add_generation_prompt: false }],
  ["parallel_calls_and_results", { messages: [{ role: "user", content: "Weather and events in Rome today?" }, CALL_TWO, RESULT_ROME, RESULT_EVENTS], tools: AGENT_TOOLS, add_generation_prompt: true }],
  ["multi_turn_reasoning_dropped", { messages: [SYS, CODE_Q, CALL_SHELL_RICH, RESULT_SHELL, ANSWER_SHELL, WEATHER_Q, CALL_WEATHER, RESULT_WEATHER, ANSWER_WEATHER], tools: AGENT_TOOLS, add_generation_prompt: false }],
  ["think_in_content_after_last_user", { messages: [U1, { role: "assistant", content: "<think>\n\nRecall geography.\n\n</think>\n\nParis.\n" }], add_generation_prompt: false }],
  ["reasoning_content_history", { messages: [U1, THINKING_TURN, U2, { role: "assistant", content: "Rome.", reasoning_content: "Italy → Rome." }], add_generation_prompt: false }],
  ["tool_results_as_parts", {
    messages: [WEATHER_Q, CALL_WEATHER, { role: "tool", content: [{ type: "text", text: "21°C sunny" }, { output: "19°C cloudy" }, { type: "image", image: "x.png" }] }],
    tools: TOOLS, add_generation_prompt: true,
  }],
  ["content_parts", { messages: [{ role: "user", content: [{ type: "text", text: "What is " }, { type: "image" }, "the capital?"] }, { role: "assistant", content: [{ type: "text", text: "Paris." }] }], add_generation_prompt: false }],
  ["tool_call_flat_form_last", { messages: [U1, { role: "assistant", content: "Looking.", tool_calls: [{ name: "search", arguments: { query: "capital of France" } }] }, { role: "tool", content: "Paris" }], add_generation_prompt: true }],
  ["tool_call_number_forms", {
    messages: [U1, { role: "assistant", content: "", tool_calls: [{ type: "function", function: { name: "tune", arguments: { small: 1e-7, huge: 1e21, ratio: 0.1, neg: -2.5, flag: false, nothing: null, nested: { "ключ": [1.5, "два", null, true], q: "it's \"x\"" }, text: "line1\nline2 «ü»" } } }] }, { role: "tool", content: "ok" }],
    add_generation_prompt: true,
  }],
  // A result part that is neither text nor output prints as a Python dict (repr: quotes, escapes of non-printables).
  ["tool_result_parts_repr", {
    messages: [WEATHER_Q, CALL_WEATHER, { role: "tool", content: [{ type: "json", data: { t: 21.5, ok: true, none: null, s: "it's \"q\" \u00a0\u200b\u2028\u0085\t é 🎉 \\" } }, "plain string part"] }],
    tools: TOOLS, add_generation_prompt: true,
  }],
  ["error_tool_without_call", { messages: [U1, { role: "tool", content: "42" }], add_generation_prompt: true }],
  ["error_tool_after_answer", { messages: [WEATHER_Q, CALL_WEATHER, RESULT_WEATHER, ANSWER_WEATHER, { role: "tool", content: "late" }], add_generation_prompt: true }],
];

// GLM-4.7-Flash (glm4_moe_lite): GLM-4.6's format with clear_thinking, </think> for turns without reasoning.
export const glm47 = [
  ["clear_thinking_false_keeps_history", { messages: [U1, THINKING_TURN, U2, { role: "assistant", content: "Rome.", reasoning_content: "Italy → Rome." }], add_generation_prompt: false, clear_thinking: false }],
  ["clear_thinking_true_drops_history", { messages: [U1, THINKING_TURN, U2, { role: "assistant", content: "Rome.", reasoning_content: "Italy → Rome." }], add_generation_prompt: false, clear_thinking: true }],
  ["agent_tools_pending", { messages: [SYS, WEATHER_Q, CALL_WEATHER, RESULT_WEATHER], tools: AGENT_TOOLS, add_generation_prompt: true }],
  ["agent_rich_arguments", { messages: [CODE_Q, CALL_SHELL_RICH, RESULT_SHELL, ANSWER_SHELL, U2], tools: AGENT_TOOLS, add_generation_prompt: true, enable_thinking: false }],
  ["parallel_calls_and_results", { messages: [{ role: "user", content: "Weather and events in Rome today?" }, CALL_TWO, RESULT_ROME, RESULT_EVENTS], tools: AGENT_TOOLS, add_generation_prompt: true }],
  ["multi_step_agent", { messages: [SYS, CODE_Q, CALL_SHELL_RICH, RESULT_SHELL, CALL_TWO, RESULT_ROME, RESULT_EVENTS, ANSWER_SHELL, WEATHER_Q, CALL_WEATHER, RESULT_WEATHER], tools: AGENT_TOOLS, add_generation_prompt: true }],
  ["tool_result_parts_repr", {
    messages: [WEATHER_Q, CALL_WEATHER, { role: "tool", content: [{ type: "json", data: { t: 21.5, ok: true, none: null, s: "it's \"q\" \u00a0\u200b\u2028\u0085\t é 🎉 \\" } }, { output: ["a", 1e-7] }, "plain string part"] }],
    tools: TOOLS, add_generation_prompt: true,
  }],
  ["tool_call_number_forms", {
    messages: [U1, { role: "assistant", content: "Tuning.", tool_calls: [{ type: "function", function: { name: "tune", arguments: { small: 1e-7, huge: 1e21, ratio: 0.1, flag: false, nothing: null, nested: { "ключ": [1.5, "два"] }, text: "line1\nline2 «ü»" } } }] }],
    add_generation_prompt: false,
  }],
  ["content_parts_and_system_parts", { messages: [SYS_PARTS, PARTS_USER, PARTS_ASSISTANT], add_generation_prompt: true, enable_thinking: true }],
];

// Kimi-K2: <|im_user|>/<|im_assistant|>/<|im_system|> with <|im_middle|>, tool calls functions.NAME:IDX.
const KIMI_CALL = {
  role: "assistant",
  content: "Let me check.",
  tool_calls: [
    { id: "functions.get_weather:0", type: "function", function: { name: "get_weather", arguments: '{"location": "Paris", "days": 3}' } },
    { id: "functions.search:1", type: "function", function: { name: "search", arguments: '{"query": "Paris «events»"}' } },
  ],
};
const KIMI_RESULTS = [
  { role: "tool", tool_call_id: "functions.get_weather:0", name: "get_weather", content: '{"max": 21, "sky": "sunny"}' },
  { role: "tool", tool_call_id: "functions.search:1", name: "search", content: "1. Nuit Blanche\n2. Jazz à la Villette" },
];
const KIMI_PARTS = { role: "user", content: [{ type: "text", text: "What is in this image?" }, { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } }, { type: "text", text: "Be brief." }] };

export const kimiK2 = [
  ["tools_declared", { messages: [SYS, WEATHER_Q], tools: AGENT_TOOLS, add_generation_prompt: true }],
  ["tool_calls_and_results", { messages: [WEATHER_Q, KIMI_CALL, ...KIMI_RESULTS, { role: "assistant", content: "Sunny, 21°C; Nuit Blanche is on." }, U2], tools: TOOLS, add_generation_prompt: true }],
  // This template passes the arguments through tojson: a mapping prints as JSON, a JSON string is quoted again.
  ["tool_call_dict_arguments", { messages: [WEATHER_Q, CALL_WEATHER, RESULT_WEATHER], tools: TOOLS, add_generation_prompt: true }],
  ["tool_call_no_content", { messages: [WEATHER_Q, { ...KIMI_CALL, content: null }, KIMI_RESULTS[0]], add_generation_prompt: true }],
  ["content_parts_image", { messages: [KIMI_PARTS, PARTS_ASSISTANT, { role: "user", content: [{ type: "image" }, { type: "text", text: "And this?" }] }], add_generation_prompt: true }],
  ["content_none", { messages: [U1, { role: "assistant", content: null }, U2], add_generation_prompt: true }],
  ["tool_call_unicode_dict_arguments", { messages: [U1, { role: "assistant", content: "", tool_calls: [{ type: "function", function: { name: "search", arguments: { query: "Zürich «événements» 東京", top_k: 3, ratio: 1e-7 } } }] }, { role: "tool", tool_call_id: "functions.search:0", content: "none" }], add_generation_prompt: true }],
  ["other_role_ignored", { messages: [{ role: "developer", content: "Be brief." }, U1], add_generation_prompt: true }],
];

// Kimi-K2-Instruct / -Thinking as llama.cpp edited them: tool-call ids are kept in a list with append/pop, which
// transformers' ImmutableSandboxedEnvironment refuses (jinja2: SecurityError); a tool result with no call before it
// gets the id functions.NAME:N.
export const kimiK2Instruct = [
  ["named_messages", { messages: [{ role: "system", content: "You are a terse assistant.", name: "policy" }, { role: "user", content: "Hi, who are you?", name: "alice" }, { role: "assistant", content: "Kimi.", name: "kimi" }, U2], add_generation_prompt: true }],
  ["tools_declared", { messages: [WEATHER_Q], tools: AGENT_TOOLS, add_generation_prompt: true }],
  ["tool_result_without_call", { messages: [U1, { role: "tool", name: "lookup", content: "Paris" }, { role: "tool", content: "second" }], add_generation_prompt: true }],
  ["content_parts_image", { messages: [KIMI_PARTS, PARTS_ASSISTANT], add_generation_prompt: false }],
  ["error_tool_calls_append", { messages: [WEATHER_Q, KIMI_CALL, ...KIMI_RESULTS], tools: TOOLS, add_generation_prompt: true }],
];

export const kimiK2Thinking = [
  ["reasoning_suffix_kept", { messages: [SYS, U1, THINKING_TURN, U2, { role: "assistant", content: "Rome.", reasoning_content: "Italy → Rome." }], add_generation_prompt: false }],
  ["reasoning_after_last_answer", { messages: [U1, THINKING_TURN, U2], add_generation_prompt: true }],
  ["reasoning_missing_in_suffix", { messages: [U1, A1, U2, { role: "assistant", content: "Rome." }, { role: "user", content: "Thanks!" }, { role: "assistant", content: "You're welcome." }], add_generation_prompt: false }],
  ["tools_declared", { messages: [WEATHER_Q], tools: AGENT_TOOLS, add_generation_prompt: true }],
  ["tool_result_without_call", { messages: [U1, { role: "tool", name: "lookup", content: "Paris" }], add_generation_prompt: true }],
  ["content_parts_image", { messages: [SYS_PARTS, KIMI_PARTS, { ...PARTS_ASSISTANT, reasoning_content: "Look at the picture." }], add_generation_prompt: false }],
  ["error_tool_calls_append", { messages: [WEATHER_Q, { ...KIMI_CALL, reasoning_content: "Two lookups." }, ...KIMI_RESULTS], tools: TOOLS, add_generation_prompt: true }],
];

// Integers beyond 64 bits in tool-call arguments and results (a calculator tool): Python's json keeps them exact.
const WIDE_CALL = {
  role: "assistant",
  content: "",
  tool_calls: [{ type: "function", function: { name: "multiply", arguments: { a: 4294967296, b: 4294967311, expected: 18446744138134061000, floor: -9223372036854776000, ids: [12345678901234567000, 7] } } }],
};
const WIDE_RESULT = { role: "tool", content: '{"product": 18446744138134061056}' };
const WIDE_Q = { role: "user", content: "Multiply 4294967296 by 4294967311." };
export const wideIntegers = [["tool_call_wide_integers", { messages: [WIDE_Q, WIDE_CALL, WIDE_RESULT], add_generation_prompt: true }]];
