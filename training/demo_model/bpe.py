"""A byte-level BPE tokenizer trained from the corpus, written as a Hugging Face tokenizer.json.

The pipeline is Qwen2's (NFC, a Split regex that isolates every digit, byte-level mapping, BPE), so digits are
single tokens and arithmetic is learnable; the trainer is the classic merge-the-most-frequent-pair loop over
pre-tokenized word counts, with pair counts updated incrementally. `Encoder` encodes text exactly as
tokenizer.json specifies (checked against the engine's tokenizer and @huggingface/tokenizers by the tests).
"""
from __future__ import annotations

import collections
import json
import unicodedata

import regex

# Qwen2's pre-tokenizer pattern: \p{N} alone, so every digit is its own pre-token and no merge can join digits.
SPLIT_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = ("{%- for message in messages %}"
                 "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
                 "{%- endfor %}"
                 "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from bytes to printable characters (the ByteLevel pre-tokenizer's alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE_MAP = bytes_to_unicode()
_split = regex.compile(SPLIT_PATTERN)


def pretokenize(text: str) -> list[str]:
    """NFC, the Split regex, then each piece's UTF-8 bytes in the byte-level alphabet."""
    text = unicodedata.normalize("NFC", text)
    return ["".join(BYTE_MAP[b] for b in piece.encode("utf-8")) for piece in _split.findall(text)]


def train(texts, vocab_size: int) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Learns merges until the vocabulary (256 bytes + merges + specials) has vocab_size entries."""
    counts = collections.Counter()
    for t in texts:
        counts.update(pretokenize(t))
    words = [list(w) for w in counts]
    freq = [counts[w] for w in counts]
    pair_count = collections.Counter()
    where = collections.defaultdict(set)  # pair -> indices of words holding it
    for i, w in enumerate(words):
        for p in zip(w, w[1:]):
            pair_count[p] += freq[i]
            where[p].add(i)
    vocab = {c: i for i, c in enumerate(sorted(BYTE_MAP.values(), key=lambda ch: ord(ch)))}
    merges = []
    n_merges = vocab_size - len(vocab) - len(SPECIALS)
    while len(merges) < n_merges and pair_count:
        # Most frequent pair; ties broken by the pair itself so the result does not depend on dict order.
        best = max(pair_count.items(), key=lambda kv: (kv[1], kv[0][0], kv[0][1]))[0]
        if pair_count[best] < 2:
            break
        merges.append(best)
        merged = best[0] + best[1]
        vocab[merged] = len(vocab)
        for i in list(where[best]):
            w = words[i]
            for p in zip(w, w[1:]):
                pair_count[p] -= freq[i]
                if pair_count[p] <= 0:
                    del pair_count[p]
            out, j = [], 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == best[0] and w[j + 1] == best[1]:
                    out.append(merged)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
            for p in zip(out, out[1:]):
                pair_count[p] += freq[i]
                where[p].add(i)
        del where[best]
    for s in SPECIALS:
        vocab[s] = len(vocab)
    return vocab, merges


def tokenizer_json(vocab: dict[str, int], merges: list[tuple[str, str]]) -> dict:
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": vocab[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for s in SPECIALS],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": SPLIT_PATTERN}, "behavior": "Isolated", "invert": False},
            byte_level]},
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {k: v for k, v in vocab.items() if k not in SPECIALS},
                  "merges": [f"{a} {b}" for a, b in merges]},
    }


def tokenizer_config(vocab: dict[str, int], max_length: int) -> dict:
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {str(vocab[s]): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                                                 "single_word": False, "special": True} for s in SPECIALS},
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": max_length,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


class Encoder:
    """Encodes text as tokenizer.json says: special tokens split out first, then BPE per pre-token."""

    def __init__(self, vocab: dict[str, int], merges: list[tuple[str, str]]):
        self.vocab = vocab
        self.ranks = {m: i for i, m in enumerate(merges)}
        self.cache: dict[str, list[int]] = {}
        self.special = regex.compile("(" + "|".join(regex.escape(s) for s in SPECIALS) + ")")
        self.inverse = {v: k for k, v in vocab.items()}
        self.unbyte = {c: b for b, c in BYTE_MAP.items()}

    def _bpe(self, piece: str) -> list[int]:
        if piece in self.cache:
            return self.cache[piece]
        parts = list(piece)
        while len(parts) > 1:
            ranked = [(self.ranks.get((a, b), 1 << 30), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            rank, i = min(ranked)
            if rank == 1 << 30:
                break
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        ids = [self.vocab[p] for p in parts]
        self.cache[piece] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        ids = []
        for chunk in self.special.split(text):
            if chunk in SPECIALS:
                ids.append(self.vocab[chunk])
            elif chunk:
                for piece in pretokenize(chunk):
                    ids.extend(self._bpe(piece))
        return ids

    def decode(self, ids: list[int]) -> str:
        out = bytearray()
        for i in ids:
            piece = self.inverse[i]
            if piece in SPECIALS:
                out += piece.encode()
            else:
                out += bytes(self.unbyte[c] for c in piece)
        return out.decode("utf-8", errors="replace")


def save(directory, vocab, merges, max_length: int) -> None:
    with open(f"{directory}/tokenizer.json", "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(vocab, merges), f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(f"{directory}/tokenizer_config.json", "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(vocab, max_length), f, ensure_ascii=False, indent=2)
        f.write("\n")


def load(directory) -> Encoder:
    with open(f"{directory}/tokenizer.json", encoding="utf-8") as f:
        tj = json.load(f)
    vocab = dict(tj["model"]["vocab"])
    for t in tj["added_tokens"]:
        vocab[t["content"]] = t["id"]
    merges = [tuple(m.split(" ")) for m in tj["model"]["merges"]]
    return Encoder(vocab, merges)
