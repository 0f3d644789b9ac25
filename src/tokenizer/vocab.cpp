#include "tokenizer/vocab.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string_view>

#include "common/error.h"
#include "tokenizer/unicode.h"

namespace df {
namespace {

bool is_one_of(std::string_view s, std::span<const std::string_view> names) {
  return std::find(names.begin(), names.end(), s) != names.end();
}

uint32_t attr_from_type(int32_t type) {
  switch (static_cast<TokenType>(type)) {
    case TokenType::UNKNOWN: return TOKEN_ATTR_UNKNOWN;
    case TokenType::UNUSED: return TOKEN_ATTR_UNUSED;
    case TokenType::NORMAL: return TOKEN_ATTR_NORMAL;
    case TokenType::CONTROL: return TOKEN_ATTR_CONTROL;
    case TokenType::USER_DEFINED: return TOKEN_ATTR_USER_DEFINED;
    case TokenType::BYTE: return TOKEN_ATTR_BYTE;
    default: return TOKEN_ATTR_UNDEFINED;
  }
}

// Texts llama.cpp (llama_vocab::impl::load) uses to find special tokens when the GGUF file
// does not name them.
constexpr std::string_view kEotNames[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "<end_of_utterance>"};
constexpr std::string_view kEomNames[] = {"<|eom_id|>"};
constexpr std::string_view kFimPreNames[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
    "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"};
constexpr std::string_view kFimSufNames[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>",
    "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"};
constexpr std::string_view kFimMidNames[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
    "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"};
constexpr std::string_view kFimPadNames[] = {
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::string_view kFimRepNames[] = {
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::string_view kFimSepNames[] = {"<|file_sep|>"};
constexpr std::string_view kEogNames[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "[e~["};

constexpr std::string_view kAlwaysRenderNames[] = {"<|channel|>", "<|message|>", "<|start|>",
                                                   "<|constrain|>"};

// Bytes a NORMAL token stands for: each code point of its text mapped back through the
// GPT-2 alphabet; a code point outside it is rendered as llama.cpp's llama_decode_text does.
std::string decode_byte_level(const std::string& text) {
  std::string out;
  for (uint32_t cpt : unicode::decode_lossy(text)) {
    const int b = unicode::cpt_to_byte(cpt);
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
      continue;
    }
    std::string utf8;
    unicode::append_utf8(utf8, cpt);
    out += "[UNK_BYTE_0x";
    for (char c : utf8) {
      char hex[3];
      std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned>(static_cast<uint8_t>(c)));
      out += hex;
    }
    out += text + "]";
  }
  return out;
}

std::string piece_of(const Vocab& v, Token id) {
  const uint32_t a = v.attr[id];
  const std::string& text = v.text[id];
  if (a & (TOKEN_ATTR_UNKNOWN | TOKEN_ATTR_CONTROL | TOKEN_ATTR_USER_DEFINED)) return text;
  if (a & TOKEN_ATTR_NORMAL) return decode_byte_level(text);
  if (a & TOKEN_ATTR_BYTE) {
    // "<0xAB>": two hex digits at offset 3, parsed like strtol.
    if (text.size() < 3) throw Error("byte token " + std::to_string(id) + " has malformed text '" + text + "'");
    const std::string hex = text.substr(3, 2);
    return std::string(1, static_cast<char>(std::strtol(hex.c_str(), nullptr, 16)));
  }
  return {};
}

void resolve_special_ids(const TokenizerSource& src, Vocab& v) {
  const auto n = static_cast<Token>(v.text.size());
  // llama.cpp's defaults for byte-level BPE: bos = eos = 11 (when in range).
  v.bos = v.eos = n > 11 ? 11 : -1;
  struct Key {
    const char* name;
    Token* id;
  };
  // Order matters: the deprecated prefix/suffix/middle keys override the fim_* ones.
  const Key keys[] = {
      {"bos_token_id", &v.bos},         {"eos_token_id", &v.eos},
      {"eot_token_id", &v.eot},         {"eom_token_id", &v.eom},
      {"unknown_token_id", &v.unk},     {"seperator_token_id", &v.sep},
      {"padding_token_id", &v.pad},     {"mask_token_id", &v.mask},
      {"fim_pre_token_id", &v.fim_pre}, {"fim_suf_token_id", &v.fim_suf},
      {"fim_mid_token_id", &v.fim_mid}, {"fim_pad_token_id", &v.fim_pad},
      {"fim_rep_token_id", &v.fim_rep}, {"fim_sep_token_id", &v.fim_sep},
      {"prefix_token_id", &v.fim_pre},  {"suffix_token_id", &v.fim_suf},
      {"middle_token_id", &v.fim_mid},
  };
  for (const Key& k : keys) {
    for (const auto& [name, value] : src.ids) {
      if (name == k.name && value < static_cast<uint64_t>(n)) *k.id = static_cast<Token>(value);
    }
  }

  // Ids still missing are found by token text; a token found this way becomes CONTROL.
  // (llama.cpp walks a hash map, so with several candidates its pick is unspecified; we take
  // the lowest id.)
  struct Detect {
    Token* id;
    std::span<const std::string_view> names;
  };
  const Detect detect[] = {
      {&v.eot, kEotNames},         {&v.eom, kEomNames},         {&v.fim_pre, kFimPreNames},
      {&v.fim_suf, kFimSufNames},  {&v.fim_mid, kFimMidNames},  {&v.fim_pad, kFimPadNames},
      {&v.fim_rep, kFimRepNames},  {&v.fim_sep, kFimSepNames},
  };
  for (const Detect& d : detect) {
    if (*d.id != -1) continue;
    for (Token id = 0; id < n; ++id) {
      if (is_one_of(v.text[id], d.names)) {
        *d.id = id;
        v.attr[id] |= TOKEN_ATTR_CONTROL;
        break;
      }
    }
  }
}

void build_eog(Vocab& v) {
  const auto n = static_cast<Token>(v.text.size());
  std::vector<Token> eog;
  for (Token id : {v.fim_pad, v.fim_rep, v.fim_sep}) {
    if (id != -1) eog.push_back(id);
  }
  for (Token id = 0; id < n; ++id) {
    if (is_one_of(v.text[id], kEogNames)) {
      eog.push_back(id);
      v.attr[id] |= TOKEN_ATTR_CONTROL;
    }
  }
  // gpt-oss: these always render.
  for (Token id = 0; id < n; ++id) {
    if (is_one_of(v.text[id], kAlwaysRenderNames)) {
      v.attr[id] = TOKEN_ATTR_USER_DEFINED;
    }
  }
  for (Token id : {v.eos, v.eot, v.eom}) {
    if (id != -1) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());

  // o200k_harmony / solar-open: "<|end|>" is not end-of-generation there.
  auto has = [&](std::string_view t) {
    return std::any_of(eog.begin(), eog.end(), [&](Token id) { return v.text[id] == t; });
  };
  auto drop = [&](std::string_view t, uint32_t new_attr) {
    for (auto it = eog.begin(); it != eog.end(); ++it) {
      if (v.text[*it] == t) {
        v.attr[*it] = new_attr;
        eog.erase(it);
        return;
      }
    }
  };
  const bool has_call = has("<|call|>") || has("<|calls|>");
  if (has("<|end|>") && has_call && (has("<|return|>") || has("<|flush|>"))) {
    drop("<|end|>", TOKEN_ATTR_USER_DEFINED);
  }
  // gemma4 / paddleocr: "</s>" is not end-of-generation when "<|tool_response>" is.
  if (has("<|tool_response>") && has("</s>")) drop("</s>", TOKEN_ATTR_NORMAL);
  v.eog = std::move(eog);
}

}  // namespace

Vocab build_vocab(const TokenizerSource& src) {
  if (src.model != "gpt2") {
    throw Error("unsupported tokenizer model tokenizer.ggml.model = '" + src.model +
                "' (only 'gpt2' byte-level BPE is supported)");
  }
  const size_t n = src.tokens.size();
  if (n == 0) throw Error("tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(INT32_MAX)) throw Error("tokenizer.ggml.tokens has too many entries");
  if (!src.token_types.empty() && src.token_types.size() < n) {
    throw Error("tokenizer.ggml.token_type has " + std::to_string(src.token_types.size()) +
                " entries for " + std::to_string(n) + " tokens");
  }

  Vocab v;
  v.text.resize(n);
  v.type.resize(n, TokenType::NORMAL);
  v.attr.resize(n, TOKEN_ATTR_NORMAL);
  v.ids.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    v.text[i] = src.tokens[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : src.tokens[i];
    if (!v.ids.emplace(v.text[i], static_cast<Token>(i)).second) {
      throw Error("tokenizer.ggml.tokens has a duplicate entry '" + v.text[i] + "' (ids " +
                  std::to_string(v.ids.at(v.text[i])) + " and " + std::to_string(i) + ")");
    }
    if (!src.token_types.empty()) {
      const int32_t t = src.token_types[i];
      v.type[i] = (t >= 0 && t <= 6) ? static_cast<TokenType>(t) : TokenType::UNDEFINED;
      v.attr[i] = attr_from_type(t);
    }
  }

  resolve_special_ids(src, v);
  // CONTROL tokens named "...unused..." are marked UNUSED.
  for (size_t i = 0; i < n; ++i) {
    if ((v.attr[i] & TOKEN_ATTR_CONTROL) && v.text[i].find("unused") != std::string::npos) {
      v.attr[i] |= TOKEN_ATTR_UNUSED;
    }
  }
  build_eog(v);

  // Tokens matched in raw text before BPE, longest first. Same std::sort call on the same
  // input order as llama.cpp, so ties between equal lengths come out in the same order.
  for (size_t i = 0; i < n; ++i) {
    if (v.attr[i] & (TOKEN_ATTR_CONTROL | TOKEN_ATTR_USER_DEFINED | TOKEN_ATTR_UNKNOWN)) {
      v.special_split.push_back(static_cast<Token>(i));
    }
  }
  std::sort(v.special_split.begin(), v.special_split.end(),
            [&](Token a, Token b) { return v.text[a].size() > v.text[b].size(); });

  v.piece.resize(n);
  for (size_t i = 0; i < n; ++i) v.piece[i] = piece_of(v, static_cast<Token>(i));
  return v;
}

}  // namespace df
