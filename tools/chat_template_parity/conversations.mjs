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
