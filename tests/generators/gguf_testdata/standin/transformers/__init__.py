"""A stand-in for the two names of Hugging Face `transformers` that llama.cpp's convert_hf_to_gguf.py imports
(transformers is not packaged for Debian 12). Used only to generate test data, never by Colibri itself.

- AutoConfig.from_pretrained(dir) returns config.json (what transformers' to_dict() gives for these configs).
- AutoTokenizer.from_pretrained(dir) loads a byte-level BPE tokenizer.json (the Qwen2/Qwen3, gpt-oss and DeepSeek-V3
  kind: no normalizer or NFC, Split regexes (Isolated) + ByteLevel pre-tokenizer, optional ignore_merges, added tokens;
  tokenizer_config.json's add_bos_token / add_eos_token add BOS / EOS as transformers does) and implements the part of the
  PreTrainedTokenizerFast interface the converter uses: vocab / get_vocab(), get_added_vocab(),
  added_tokens_decoder, encode() and decode(). encode() is a plain BPE written from the algorithm; the
  converter hashes its output for a fixed text and accepts the tokenizer only if the hash is one it knows for a
  real Hugging Face tokenizer, which checks this stand-in against transformers on that text.
"""
import json
import unicodedata
from pathlib import Path

import regex

__all__ = ["AutoConfig", "AutoTokenizer"]
__version__ = "0.0-colibri-standin"


class _Config(dict):
    def to_dict(self):
        return dict(self)


class AutoConfig:
    @staticmethod
    def from_pretrained(path, **_kwargs):
        with open(Path(path) / "config.json", encoding="utf-8") as f:
            return _Config(json.load(f))


def _bytes_to_unicode():
    # GPT-2's reversible map from bytes to printable characters.
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


class _AddedToken:
    def __init__(self, entry):
        self.content = entry["content"]
        self.special = bool(entry.get("special", False))
        self.normalized = bool(entry.get("normalized", not self.special))


class _ByteLevelBpe:
    def __init__(self, path):
        path = Path(path)
        with open(path / "tokenizer.json", encoding="utf-8") as f:
            tj = json.load(f)
        model = tj["model"]
        if model.get("type") != "BPE":
            raise ValueError("stand-in AutoTokenizer: only BPE models")
        self._vocab = dict(model["vocab"])
        self._ranks = {}
        for rank, m in enumerate(model["merges"]):
            a, b = m if isinstance(m, list) else m.split(" ")
            self._ranks[(a, b)] = rank
        self._ignore_merges = bool(model.get("ignore_merges", False))
        normalizer = tj.get("normalizer") or {}
        self._nfc = normalizer.get("type") == "NFC"
        if normalizer and not self._nfc and normalizer != {"type": "Sequence", "normalizers": []}:
            raise ValueError("stand-in AutoTokenizer: only no normalizer or NFC")
        pre = tj.get("pre_tokenizer") or {}
        parts = pre.get("pretokenizers", [pre])
        splits = [p for p in parts if p.get("type") == "Split"]
        if not splits or any("Regex" not in p["pattern"] or p.get("behavior") != "Isolated" or p.get("invert") for p in splits):
            raise ValueError("stand-in AutoTokenizer: needs Split regex pre-tokenizers (Isolated, not inverted)")
        self._patterns = [regex.compile(p["pattern"]["Regex"]) for p in splits]
        self._added = {e["id"]: _AddedToken(e) for e in tj.get("added_tokens", [])}
        self._added_by_content = {t.content: i for i, t in self._added.items()}
        config = {}
        if (path / "tokenizer_config.json").exists():
            with open(path / "tokenizer_config.json", encoding="utf-8") as f:
                config = json.load(f)
        name = lambda t: t.get("content") if isinstance(t, dict) else t  # noqa: E731
        self._prefix, self._suffix = [], []
        if config.get("add_bos_token") and name(config.get("bos_token")) in self.get_vocab():
            self._prefix = [self.get_vocab()[name(config["bos_token"])]]
        if config.get("add_eos_token") and name(config.get("eos_token")) in self.get_vocab():
            self._suffix = [self.get_vocab()[name(config["eos_token"])]]
        self._byte_enc = _bytes_to_unicode()
        self._byte_dec = {c: b for b, c in self._byte_enc.items()}
        self._id_to_piece = {i: p for p, i in self._vocab.items()}

    # --- the interface convert_hf_to_gguf.py uses ---
    @property
    def vocab(self):
        return self.get_vocab()

    def get_vocab(self):
        v = dict(self._vocab)
        v.update(self._added_by_content)
        return v

    def get_added_vocab(self):
        return dict(self._added_by_content)

    @property
    def added_tokens_decoder(self):
        return dict(self._added)

    def encode(self, text, add_special_tokens=True):
        ids = []
        for piece, added_id in self._split_added(text):
            if added_id is not None:
                ids.append(added_id)
                continue
            if self._nfc:
                piece = unicodedata.normalize("NFC", piece)
            words = [piece]
            for pattern in self._patterns:
                words = [w for word in words for w in self._split(pattern, word)]
            for w in words:
                word = "".join(self._byte_enc[b] for b in w.encode("utf-8"))
                if self._ignore_merges and word in self._vocab:
                    ids.append(self._vocab[word])
                else:
                    ids.extend(self._vocab[s] for s in self._bpe(word))
        return self._prefix + ids + self._suffix if add_special_tokens else ids

    def decode(self, ids, **_kwargs):
        out, pending = [], bytearray()
        for i in ids:
            if i in self._added:
                out.append(pending.decode("utf-8", errors="replace"))
                pending = bytearray()
                out.append(self._added[i].content)
            else:
                pending.extend(self._byte_dec[c] for c in self._id_to_piece[i])
        out.append(pending.decode("utf-8", errors="replace"))
        return "".join(out)

    # --- internals ---
    @staticmethod
    def _split(pattern, text):
        """A Split pre-tokenizer with the Isolated behaviour: the matches and the text between them."""
        out, last = [], 0
        for m in pattern.finditer(text):
            if m.start() > last:
                out.append(text[last:m.start()])
            if m.end() > m.start():
                out.append(m.group(0))
            last = m.end()
        if last < len(text):
            out.append(text[last:])
        return out

    def _split_added(self, text):
        """Leftmost-longest matches of added tokens; the rest is plain text."""
        contents = sorted(self._added_by_content, key=len, reverse=True)
        i, start = 0, 0
        while i < len(text):
            hit = next((c for c in contents if text.startswith(c, i)), None)
            if hit is None:
                i += 1
                continue
            if start < i:
                yield text[start:i], None
            yield hit, self._added_by_content[hit]
            i += len(hit)
            start = i
        if start < len(text):
            yield text[start:], None

    def _bpe(self, word):
        symbols = list(word)
        while len(symbols) > 1:
            best = min(range(len(symbols) - 1), key=lambda k: (self._ranks.get((symbols[k], symbols[k + 1]), 1 << 62), k))
            if (symbols[best], symbols[best + 1]) not in self._ranks:
                break
            symbols[best:best + 2] = [symbols[best] + symbols[best + 1]]
        return symbols


class AutoTokenizer:
    @staticmethod
    def from_pretrained(path, **_kwargs):
        return _ByteLevelBpe(path)
