#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenizer.h"

#include <pcre2.h>

#include "common/error.h"
#include "tokenizer/unicode.h"

namespace df {
namespace {

// The pre-tokenizer regexes, as llama.cpp's llm_tokenizer_bpe writes them (the "adapted"
// forms: case-insensitive contractions spelled out as character classes).
constexpr const char* kRegexQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Qwen3.5: letter runs also take combining marks (\p{M}).
constexpr const char* kRegexQwen35 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kRegexGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";

const char* regex_for(std::string_view pre) {
  if (pre == "qwen2") return kRegexQwen2;
  if (pre == "qwen35") return kRegexQwen35;
  if (pre == "gpt-2") return kRegexGpt2;
  return nullptr;
}

// Characters the regexes spell out literally keep their identity in the canonical text.
bool is_literal(uint32_t c) {
  switch (c) {
    case ' ': case '\r': case '\n': case '\'':
    case 's': case 'S': case 't': case 'T': case 'r': case 'R': case 'e': case 'E':
    case 'v': case 'V': case 'm': case 'M': case 'l': case 'L': case 'd': case 'D':
      return true;
    default:
      return false;
  }
}

// Appends the canonical representative of cpt (see pretokenizer.h).
void append_canonical(std::string& out, uint32_t cpt) {
  if (is_literal(cpt)) {
    out.push_back(static_cast<char>(cpt));
    return;
  }
  switch (unicode::char_class(cpt)) {
    case unicode::CharClass::LETTER: out.push_back('a'); break;
    case unicode::CharClass::NUMBER: out.push_back('0'); break;
    case unicode::CharClass::SPACE: out.push_back('\t'); break;
    case unicode::CharClass::MARK: out.append("\xCC\x80"); break;  // U+0300, \p{Mn}
    case unicode::CharClass::OTHER: out.push_back('!'); break;
  }
}

}  // namespace

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

bool PreTokenizer::supported(std::string_view pre) { return regex_for(pre) != nullptr; }

PreTokenizer::PreTokenizer(std::string_view pre) : re_(std::make_unique<Compiled>()) {
  const char* rx = regex_for(pre);
  if (rx == nullptr) {
    throw Error("unsupported pre-tokenizer tokenizer.ggml.pre = '" + std::string(pre) +
                "' (supported: qwen2, qwen35, gpt-2)");
  }
  regex_ = rx;
  int err = 0;
  PCRE2_SIZE err_off = 0;
  re_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(regex_.data()), regex_.size(), PCRE2_UTF,
                            &err, &err_off, nullptr);
  if (re_->code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw Error("pre-tokenizer regex failed to compile at offset " + std::to_string(err_off) +
                ": " + reinterpret_cast<const char*>(msg));
  }
  // JIT is an optimisation only; the interpreter gives the same matches if it is missing.
  pcre2_jit_compile(re_->code, PCRE2_JIT_COMPLETE);
}

PreTokenizer::~PreTokenizer() = default;

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string> words;
  if (text.empty()) return words;

  const std::vector<uint32_t> cpts = unicode::decode_lossy(text);
  // canon: the canonical text; cpt_index[b]: code point that starts at byte b of canon
  // (and cpt_index[canon.size()] = cpts.size()).
  std::string canon;
  canon.reserve(cpts.size() + cpts.size() / 8);
  std::vector<uint32_t> cpt_index;
  cpt_index.reserve(cpts.size() + 1);
  for (size_t i = 0; i < cpts.size(); ++i) {
    append_canonical(canon, cpts[i]);
    cpt_index.resize(canon.size(), static_cast<uint32_t>(i));
  }
  cpt_index.push_back(static_cast<uint32_t>(cpts.size()));

  auto emit = [&](size_t cpt_begin, size_t cpt_end) {
    if (cpt_end <= cpt_begin) return;
    std::string utf8;
    for (size_t i = cpt_begin; i < cpt_end; ++i) unicode::append_utf8(utf8, cpts[i]);
    std::string word;
    word.reserve(utf8.size() * 2);
    for (char c : utf8) word += unicode::byte_to_utf8(static_cast<uint8_t>(c));
    words.push_back(std::move(word));
  };

  pcre2_match_data* md = pcre2_match_data_create_from_pattern(re_->code, nullptr);
  if (md == nullptr) throw Error("out of memory creating PCRE2 match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(canon.data());
  size_t pos = 0;        // byte offset in canon where the next search starts
  size_t emitted = 0;    // byte offset in canon up to which words have been emitted
  while (pos < canon.size()) {
    const int rc = pcre2_match(re_->code, subject, canon.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(md);
      throw Error("pre-tokenizer regex match failed (PCRE2 error " + std::to_string(rc) + ")");
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t mb = ov[0], me = ov[1];
    // Text the regex skipped becomes a word of its own (as in llama.cpp's splitter).
    emit(cpt_index[emitted], cpt_index[mb]);
    emit(cpt_index[mb], cpt_index[me]);
    emitted = me;
    // None of the patterns matches the empty string; step over one character if one did.
    pos = me > mb ? me : me + 1;
    while (pos < canon.size() && (static_cast<uint8_t>(canon[pos]) & 0xC0) == 0x80) ++pos;
  }
  pcre2_match_data_free(md);
  emit(cpt_index[emitted], cpts.size());
  return words;
}

}  // namespace df
