// Tokenizer behaviour on a small hand-built vocabulary: BPE order, special-token
// partitioning as llama.cpp does it, byte fallback, decoding, stop tokens, errors, and the
// pre-tokenizer's word splits.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

using df::Token;
using df::TokenType;

// 256 byte tokens (id = byte value), then merged tokens, then special tokens.
struct TinyVocab {
  df::TokenizerSource src;
  Token add(const std::string& text, TokenType type = TokenType::NORMAL) {
    src.tokens.push_back(text);
    src.token_types.push_back(static_cast<int32_t>(type));
    return static_cast<Token>(src.tokens.size() - 1);
  }
  TinyVocab() {
    src.pre = "qwen2";
    for (int b = 0; b < 256; ++b) add(df::unicode::byte_to_utf8(static_cast<uint8_t>(b)));
  }
};

// Byte-level text ("Ġ" for space, ...) of a plain string.
std::string bl(const std::string& s) {
  std::string out;
  for (char c : s) out += df::unicode::byte_to_utf8(static_cast<uint8_t>(c));
  return out;
}

std::vector<Token> bytes_of(const std::string& s) {
  std::vector<Token> ids;
  for (char c : s) ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

class TinyTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    he = v.add("he");
    ll = v.add("ll");
    hell = v.add("hell");
    hello = v.add("hello");
    sp_w = v.add(bl(" w"));
    // Merge order = rank. "l l" is listed before "h e": ranks decide, not position.
    v.src.merges = {"l l", "h e", "he ll", "hell o", bl(" ") + " w", "x y", "he he"};
    eot = v.add("<|endoftext|>", TokenType::CONTROL);
    im_start = v.add("<|im_start|>", TokenType::CONTROL);
    im_end = v.add("<|im_end|>", TokenType::CONTROL);
    think = v.add("<think>", TokenType::USER_DEFINED);
    bcd = v.add("bcd", TokenType::USER_DEFINED);
    ab = v.add("ab", TokenType::USER_DEFINED);
    unused = v.add("<unused0>", TokenType::UNUSED);
    v.src.ids = {{"eos_token_id", static_cast<uint64_t>(eot)}, {"bos_token_id", static_cast<uint64_t>(eot)}};
    tok = df::Tokenizer::from_source(v.src);
  }
  TinyVocab v;
  Token he, ll, hell, hello, sp_w, eot, im_start, im_end, think, bcd, ab, unused;
  std::unique_ptr<df::Tokenizer> tok;
};

TEST_F(TinyTokenizer, MergesByRank) {
  EXPECT_EQ(tok->encode("hello", false), (std::vector<Token>{hello}));
  EXPECT_EQ(tok->encode("hell", false), (std::vector<Token>{hell}));
  // " w" is one word (space joins the letters); "Ġw" + "orld" has no merges.
  std::vector<Token> want = {hello, sp_w};
  for (char c : std::string("orld")) want.push_back(static_cast<uint8_t>(c));
  EXPECT_EQ(tok->encode("hello world", false), want);
}

TEST_F(TinyTokenizer, LeftmostOnEqualRank) {
  // "hehe": both "h e" pairs have rank 1; then "he he" (rank 6) -> not a token ("hehe" is
  // not in the vocabulary), so its bytes are emitted.
  EXPECT_EQ(tok->encode("hehe", false), bytes_of("hehe"));
}

TEST_F(TinyTokenizer, PieceNotInVocabFallsBackToBytes) {
  // "x y" merges to "xy", which is not a token.
  EXPECT_EQ(tok->encode("xy", false), bytes_of("xy"));
}

TEST_F(TinyTokenizer, ControlTokensOnlyWithParseSpecial) {
  const std::string text = "<|im_start|>user\nhello<|im_end|>";
  std::vector<Token> want = {im_start};
  for (Token t : bytes_of("user\n")) want.push_back(t);
  want.push_back(hello);
  want.push_back(im_end);
  EXPECT_EQ(tok->encode(text, true), want);

  // Without parse_special the control texts are plain text (no merges apply to them).
  std::vector<Token> plain = bytes_of("<|im_start|>user\n");
  plain.push_back(hello);
  for (Token t : bytes_of("<|im_end|>")) plain.push_back(t);
  EXPECT_EQ(tok->encode(text, false), plain);
}

TEST_F(TinyTokenizer, UserDefinedTokensSplitEvenWithoutParseSpecial) {
  // llama.cpp partitions USER_DEFINED tokens regardless of parse_special.
  std::vector<Token> want = {'x', think, he};
  EXPECT_EQ(tok->encode("x<think>he", false), want);
  EXPECT_EQ(tok->encode("x<think>he", true), want);
}

TEST_F(TinyTokenizer, LongerSpecialTokensAreMatchedFirst) {
  // llama.cpp takes special tokens longest first over the whole text, not leftmost-longest:
  // "abcd" -> "a" + "bcd", although "ab" starts earlier.
  EXPECT_EQ(tok->encode("abcd", true), (std::vector<Token>{'a', bcd}));
  EXPECT_EQ(tok->encode("abab", true), (std::vector<Token>{ab, ab}));
  EXPECT_EQ(tok->encode("", true), (std::vector<Token>{}));
}

TEST_F(TinyTokenizer, InvalidUtf8BecomesReplacementCharacter) {
  // Each invalid byte is U+FFFD (EF BF BD) before byte-level BPE, as in llama.cpp.
  EXPECT_EQ(tok->encode("\xff", false), bytes_of("\xEF\xBF\xBD"));
  EXPECT_EQ(tok->encode("a\xC3", false), bytes_of("a\xEF\xBF\xBD"));
  // Overlong forms are decoded, not rejected: C0 80 is U+0000.
  EXPECT_EQ(tok->encode("\xC0\x80", false), bytes_of(std::string(1, '\0')));
}

TEST_F(TinyTokenizer, DecodeAndPieces) {
  const std::vector<Token> ids = {im_start, hello, sp_w, think, im_end};
  EXPECT_EQ(tok->decode(ids, true), "<|im_start|>hello w<think><|im_end|>");
  EXPECT_EQ(tok->decode(ids, false), "hello w<think>");
  EXPECT_EQ(tok->token_to_piece(0xC3), "\xC3");
  EXPECT_EQ(tok->token_to_piece(unused), "");  // UNUSED tokens have no piece
  EXPECT_THROW(tok->token_to_piece(tok->n_vocab()), df::Error);
  EXPECT_THROW(tok->token_to_piece(-1), df::Error);
}

TEST_F(TinyTokenizer, LookupsAndStops) {
  EXPECT_EQ(tok->find("<|im_end|>"), im_end);
  EXPECT_EQ(tok->find("nope"), -1);
  EXPECT_EQ(tok->token_type(think), TokenType::USER_DEFINED);
  EXPECT_EQ(tok->token_text(hello), "hello");
  EXPECT_EQ(tok->eos_id(), eot);
  // No eot key: found by text, lowest id among the names llama.cpp knows.
  EXPECT_EQ(tok->eot_id(), eot);
  EXPECT_EQ(tok->stop_tokens(), (std::vector<Token>{eot, im_end}));
  EXPECT_TRUE(tok->is_stop(im_end));
  EXPECT_FALSE(tok->is_stop(im_start));
}

TEST(TokenizerErrors, UnsupportedModelAndPreTokenizer) {
  TinyVocab v;
  v.src.model = "llama";
  try {
    df::Tokenizer::from_source(v.src);
    FAIL() << "no error";
  } catch (const df::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'llama'"), std::string::npos) << e.what();
  }
  v.src.model = "gpt2";
  v.src.pre = "llama-bpe";
  try {
    df::Tokenizer::from_source(v.src);
    FAIL() << "no error";
  } catch (const df::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'llama-bpe'"), std::string::npos) << e.what();
  }
  v.src.pre = "qwen2";
  v.src.tokens.push_back(v.src.tokens[5]);
  v.src.token_types.push_back(1);
  EXPECT_THROW(df::Tokenizer::from_source(v.src), df::Error);  // duplicate token text
}

TEST(TokenizerDefaults, BpeDefaultsEosTo11LikeLlamaCpp) {
  TinyVocab v;  // no id keys at all
  auto tok = df::Tokenizer::from_source(v.src);
  EXPECT_EQ(tok->eos_id(), 11);
  EXPECT_EQ(tok->bos_id(), 11);
  EXPECT_EQ(tok->stop_tokens(), (std::vector<Token>{11}));
}

std::vector<std::string> split(const char* pre, const std::string& text) {
  return df::PreTokenizer(pre).split(text);
}

TEST(PreTokenizer, Qwen2Words) {
  const std::vector<std::string> want = {"Hello", bl(" world"), "'s", bl(" "), "1", "2", "3",
                                         bl("  \n\n"), bl(" x"), "'LL", bl(" ?!\n")};
  EXPECT_EQ(split("qwen2", "Hello world's 123  \n\n x'LL ?!\n"), want);
  // Whitespace before a word: all but the last space, then " word".
  EXPECT_EQ(split("qwen2", "a   b"), (std::vector<std::string>{"a", bl("  "), bl(" b")}));
  // Trailing whitespace stays together.
  EXPECT_EQ(split("qwen2", "a   "), (std::vector<std::string>{"a", bl("   ")}));
  // Non-ASCII spaces count as \s (U+3000), per llama.cpp's table.
  EXPECT_EQ(split("qwen2", "a\xE3\x80\x80" "b"),
            (std::vector<std::string>{"a", bl("\xE3\x80\x80" "b")}));
}

TEST(PreTokenizer, MarksJoinLettersOnlyInQwen35) {
  const std::string e_acute = "e\xCC\x81";  // e + U+0301
  EXPECT_EQ(split("qwen2", e_acute), (std::vector<std::string>{"e", bl("\xCC\x81")}));
  EXPECT_EQ(split("qwen35", e_acute), (std::vector<std::string>{bl(e_acute)}));
}

TEST(PreTokenizer, Gpt2ContractionsAreLowercaseOnly) {
  EXPECT_EQ(split("gpt-2", "it's IT'S"), (std::vector<std::string>{"it", "'s", bl(" IT"), "'", "S"}));
  EXPECT_EQ(split("qwen2", "IT'S"), (std::vector<std::string>{"IT", "'S"}));
}

TEST(PreTokenizer, NumbersSplitPerDigitInQwen) {
  EXPECT_EQ(split("qwen2", "x2024"), (std::vector<std::string>{"x", "2", "0", "2", "4"}));
  EXPECT_EQ(split("gpt-2", "x 2024"), (std::vector<std::string>{"x", bl(" 2024")}));
}

TEST(Unicode, LlamaCompatibleDecoding) {
  using df::unicode::decode_lossy;
  EXPECT_EQ(decode_lossy("a\xC3\xA9"), (std::vector<uint32_t>{'a', 0xE9}));
  EXPECT_EQ(decode_lossy("\xC3"), (std::vector<uint32_t>{0xFFFD}));
  EXPECT_EQ(decode_lossy("\x80\x80"), (std::vector<uint32_t>{0xFFFD, 0xFFFD}));
  EXPECT_EQ(decode_lossy("\xE0\x80\x80"), (std::vector<uint32_t>{0}));         // overlong
  EXPECT_EQ(decode_lossy("\xED\xA0\x80"), (std::vector<uint32_t>{0xD800}));    // surrogate
  EXPECT_EQ(decode_lossy("\xF4\x90\x80\x80").front(), 0xFFFDu);                // > U+10FFFF
  EXPECT_EQ(decode_lossy("\xF8\x80"), (std::vector<uint32_t>{0xFFFD, 0xFFFD}));
}

TEST(Unicode, ByteAlphabetRoundTrips) {
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(df::unicode::cpt_to_byte(df::unicode::byte_to_cpt(static_cast<uint8_t>(b))), b);
  }
  EXPECT_EQ(df::unicode::byte_to_cpt(' '), 0x120u);  // 'Ġ'
  EXPECT_EQ(df::unicode::byte_to_cpt('\n'), 0x10Au);  // 'Ċ'
  EXPECT_EQ(df::unicode::byte_to_cpt('A'), static_cast<uint32_t>('A'));
  EXPECT_EQ(df::unicode::cpt_to_byte(0x4E00), -1);
}

TEST(Unicode, IncompleteTail) {
  using df::unicode::incomplete_utf8_tail;
  EXPECT_EQ(incomplete_utf8_tail("abc"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("a\xC3"), 1u);
  EXPECT_EQ(incomplete_utf8_tail("a\xE4\xB8"), 2u);
  EXPECT_EQ(incomplete_utf8_tail("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(incomplete_utf8_tail("\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("\xE0\x80"), 0u);   // can never be valid (overlong)
  EXPECT_EQ(incomplete_utf8_tail("\xED\xA0"), 0u);   // surrogate
  EXPECT_EQ(incomplete_utf8_tail("\xF5"), 0u);       // not a lead byte
  EXPECT_EQ(incomplete_utf8_tail("\xC0"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("\x80"), 0u);
}

TEST_F(TinyTokenizer, StreamDecoderHoldsIncompleteSequences) {
  df::StreamDecoder d(*tok);
  EXPECT_EQ(d.push('a'), "a");
  EXPECT_EQ(d.push(0xE4), "");  // 中 = E4 B8 AD
  EXPECT_EQ(d.push(0xB8), "");
  EXPECT_EQ(d.push(0xAD), "\xE4\xB8\xAD");
  EXPECT_EQ(d.push(0xFF), "\xFF");  // never valid: emitted at once
  EXPECT_EQ(d.push(0xC3), "");
  EXPECT_EQ(d.push('b'), "\xC3" "b");  // the C3 can no longer complete
  EXPECT_EQ(d.push(0xE0), "");
  EXPECT_EQ(d.push(0x80), "\xE0\x80");  // E0 80 is never valid
  EXPECT_EQ(d.push(im_end), "<|im_end|>");
  EXPECT_EQ(d.push(0xF0), "");
  EXPECT_EQ(d.flush(), "\xF0");
  EXPECT_EQ(d.flush(), "");
}

TEST_F(TinyTokenizer, StreamDecoderReassemblesAnyTextExactly) {
  const std::string text = "h\xC3\xA9llo \xF0\x9F\x98\x80 \xE4\xB8\xAD\xE6\x96\x87 \xFF\xC3(";
  df::StreamDecoder d(*tok);
  std::string got;
  for (char c : text) {
    std::string chunk = d.push(static_cast<uint8_t>(c));
    // A chunk never ends inside a sequence that could still complete.
    EXPECT_EQ(df::unicode::incomplete_utf8_tail(chunk), 0u);
    got += chunk;
  }
  got += d.flush();
  EXPECT_EQ(got, text);
}

TEST(ChatPrompt, ChatMlLayout) {
  const std::vector<df::ChatMessage> msgs = {{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(df::chat_prompt(msgs, false, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_EQ(df::chat_prompt(msgs, true, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n");
  EXPECT_EQ(df::chat_prompt({{"user", "Hi"}}, true, false),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(df::chat_prompt({}, true, false), "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

}  // namespace
