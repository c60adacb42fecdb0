#!/usr/bin/python3
"""Trains a small SentencePiece BPE model (Llama-style options) with Debian's python3-sentencepiece and writes
the ids sentencepiece itself gives for the parity strings.

usage: make_sentencepiece.py OUT_DIR PARITY_STRINGS_JSON

OUT_DIR gets tokenizer.model (the trained model) and sentencepiece_expected.json: for every text of the parity
file (tests/data/tokenizer/qwen3_parity.json, only its "text" fields are used, by index), sentencepiece's
encode() ids (no BOS) and its decode() of those ids. Texts that contain a control token's text (<s>, </s>,
<unk>) are split there first, as Hugging Face tokenizers split at added tokens. The training text is Debian's /usr/share/common-licenses plus the
multilingual lines below, so the vocabulary is real but small (3000 pieces).
"""
import json
import re
import sys
from pathlib import Path

import sentencepiece as spm

MULTILINGUAL = """\
Le renard brun rapide saute par-dessus le chien paresseux. Où est la bibliothèque ? Ça coûte très cher.
Der schnelle braune Fuchs springt über den faulen Hund. Grüße aus München, schöne Straße.
El rápido zorro marrón salta sobre el perro perezoso. ¿Dónde está la estación? Mañana será otro día.
A rápida raposa marrom pula sobre o cão preguiçoso. Não sei, coração.
Быстрая коричневая лиса прыгает через ленивую собаку. Привет, как дела? Спасибо большое.
Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο. Καλημέρα σας.
素早い茶色の狐がのろまな犬を飛び越える。こんにちは、世界。東京は大きな都市です。
敏捷的棕色狐狸跳过了懒狗。你好，世界。我想在苹果公司工作。
빠른 갈색 여우가 게으른 개를 뛰어넘는다. 안녕하세요.
الثعلب البني السريع يقفز فوق الكلب الكسول. مرحبا بالعالم.
השועל החום המהיר קופץ מעל הכלב העצלן. שלום עולם.
तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है। नमस्ते दुनिया।
def main(argv):\n    return sum(int(x) for x in argv[1:]) * 2  # 1234567890
for (int i = 0; i < n; ++i) { total += values[i]; }  // C++ loop
"""


def training_lines():
    lines = []
    for p in sorted(Path("/usr/share/common-licenses").iterdir()):
        if p.is_file() and not p.is_symlink():
            lines += p.read_text(encoding="utf-8", errors="replace").splitlines()
    lines += MULTILINGUAL.splitlines() * 20
    return [line for line in lines if line.strip()]


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    corpus = out / "corpus.txt"
    corpus.write_text("\n".join(training_lines()) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(out / "tokenizer"), model_type="bpe", vocab_size=3000,
        byte_fallback=True, split_digits=True, allow_whitespace_only_pieces=True, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=True, character_coverage=0.9995,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=1, minloglevel=2)
    corpus.unlink()
    (out / "tokenizer.vocab").unlink()
    sp = spm.SentencePieceProcessor(model_file=str(out / "tokenizer.model"))
    texts = [c["text"] for c in json.loads(Path(sys.argv[2]).read_text(encoding="utf-8"))["cases"]]
    control = {sp.id_to_piece(i): i for i in range(sp.get_piece_size()) if sp.is_control(i) or sp.is_unknown(i)}
    split_at_control = re.compile("(" + "|".join(re.escape(c) for c in sorted(control, key=len, reverse=True)) + ")")
    cases = []
    for t in texts:
        if split_at_control.search(t):
            # sentencepiece reads "<s>" in text as three characters; Hugging Face's tokenizer (and so the
            # tokenizer.json an importer makes) matches it as the control token and encodes the text between
            # such tokens separately. Expected: exactly that, each part encoded by sentencepiece.
            ids = []
            for part in split_at_control.split(t):
                ids += [control[part]] if part in control else sp.encode(part)
            cases.append({"ids": ids, "split_at_control_tokens": True})
            continue
        ids = sp.encode(t)
        case = {"ids": ids}
        decoded = sp.decode(ids)
        if decoded != t:  # most texts decode to themselves; only the others carry their decoding
            case["decoded"] = decoded
        cases.append(case)
    doc = {
        "tokenizer": "tokenizer.model trained by make_sentencepiece.py (BPE, 3000 pieces, byte fallback)",
        "texts": "case i is the text of case i of tests/data/tokenizer/qwen3_parity.json",
        "expected_from": "sentencepiece %s (Debian python3-sentencepiece): encode(text) -> ids, decode(ids) -> decoded "
                         "(given only where it differs from the text)" % spm.__version__,
        "cases": cases,
    }
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).replace(',{"ids"', ',\n{"ids"')
    (out / "sentencepiece_expected.json").write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
