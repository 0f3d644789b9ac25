// README: "diskformer chat -m model.gguf   # multi-turn, streaming; /exit to quit" and
// "`--checkpoint-every N` sets how often a session checkpoints recurrent state", driving the
// built binary on the default model (a qwen35 hybrid: its recurrent state cannot be rewound,
// so what a turn reuses is decided by the checkpoints):
//   - each turn's answer is printed after a "> " prompt, the next turn's prompt holds the whole
//     conversation, and its prefill restarts from the cache (the "reused from cache" figure of
//     --stats) instead of from zero;
//   - /exit ends the chat (lines after it are not answered), as does the end of input; exit 0;
//   - an answer reaches stdout while the chat still waits for the next line (not at exit);
//   - the reused prefix of the second turn is the checkpoint nearest at or before the shared
//     prefix: without --checkpoint-every that is where the history ended (the mark `chat`
//     keeps), with --checkpoint-every 1 the shared prefix itself, with 3 the multiple of 3 at or
//     below it (when that is past the mark). The expected numbers are computed here from the
//     tokenizer and the chat template, not read from the session.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model_fixture.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace df {
namespace {

const std::string kCli = DF_CLI;
const std::string kModel = modeltest::default_model();
const std::string kTurn1 = "def add(a, b):";
const std::string kTurn2 = "Now write a function that multiplies two numbers.";

struct Chat {
  int rc = -1;
  std::vector<std::string> answers;  // what followed each "> " prompt
  size_t prompts = 0;                // "> " prompts printed
  std::vector<long long> reused;     // --stats: "prompt: N tokens (M reused from cache)" per turn
  std::vector<long long> prompt_tokens;
  std::string err;
};

// `diskformer chat FLAGS` with `input` on stdin (a file: the whole input at once).
Chat chat(const std::string& input, const std::string& flags) {
  const std::string dir = modeltest::work_dir();
  testutil::write_file(dir + "/in.txt", input);
  Chat c;
  c.rc = testutil::run_status(kCli + " chat -m " + kModel + " -q -t 1 --temp 0 -n 6 --no-think --stats " + flags +
                              " < " + dir + "/in.txt > " + dir + "/out.txt 2> " + dir + "/err.txt")
             .rc;
  const std::string out = testutil::read_file(dir + "/out.txt");
  c.err = testutil::read_file(dir + "/err.txt");
  // stdout: "\n> " ANSWER "\n" for each answered line, then "\n> " before the line that ends it.
  size_t at = 0;
  std::vector<std::string> parts;
  for (size_t next; (next = out.find("\n> ", at)) != std::string::npos; at = next + 3) parts.push_back(out.substr(at, next - at));
  parts.push_back(out.substr(at));
  c.prompts = parts.size() - 1;
  for (size_t i = 1; i + 1 < parts.size(); ++i) {  // parts[0]: before the first prompt
    std::string a = parts[i];
    if (!a.empty() && a.back() == '\n') a.pop_back();
    c.answers.push_back(a);
  }
  if (!parts.back().empty()) c.answers.push_back(parts.back());  // an answer after the last prompt (should not be)
  // Each "prompt: N tokens (M reused from cache)" of the stderr report, in order (a plain scan:
  // std::regex trips GCC 12's -Wmaybe-uninitialized under the ASan build's -O2 -Werror).
  const std::string key = "prompt: ";
  for (size_t at = c.err.find(key); at != std::string::npos; at = c.err.find(key, at + key.size())) {
    long long n = 0, m = 0;
    char tail[2] = {};
    if (std::sscanf(c.err.c_str() + at, "prompt: %lld tokens (%lld reused from cache%1[)]", &n, &m, tail) == 3) {
      c.prompt_tokens.push_back(n);
      c.reused.push_back(m);
    }
  }
  return c;
}

class ChatCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    file_ = gguf::File::open(kModel).release();
    tok_ = Tokenizer::from_gguf(*file_).release();
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete file_;
  }
  static std::vector<Token> encode(const std::vector<ChatMessage>& m, bool add_assistant) {
    return tok_->encode(chat_prompt(m, add_assistant, false), true);
  }
  static gguf::File* file_;
  static Tokenizer* tok_;
};
gguf::File* ChatCli::file_ = nullptr;
Tokenizer* ChatCli::tok_ = nullptr;

TEST_F(ChatCli, MultiTurnUntilExit) {
  // A blank line is skipped; the lines after /exit are never read as turns.
  const Chat c = chat(kTurn1 + "\n\n" + kTurn2 + "\n/exit\nthis line is after /exit\n", "");
  ASSERT_EQ(c.rc, 0) << c.err;
  EXPECT_EQ(c.prompts, 4u) << "prompts for: turn 1, the blank line, turn 2, /exit";
  ASSERT_EQ(c.answers.size(), 3u);  // turn 1, (blank: none), turn 2
  EXPECT_TRUE(c.answers[1].empty()) << "the blank line was answered: " << c.answers[1];
  EXPECT_FALSE(c.answers[0].empty());
  EXPECT_FALSE(c.answers[2].empty());
  // Two turns, two statistics blocks: the second prompt is the conversation so far (turn 1, its
  // answer, turn 2) and it restarts from the cache.
  ASSERT_EQ(c.prompt_tokens.size(), 2u) << c.err;
  const std::vector<ChatMessage> first = {{"user", kTurn1}};
  const std::vector<ChatMessage> second = {{"user", kTurn1}, {"assistant", c.answers[0]}, {"user", kTurn2}};
  EXPECT_EQ(c.prompt_tokens[0], static_cast<long long>(encode(first, true).size()));
  EXPECT_EQ(c.prompt_tokens[1], static_cast<long long>(encode(second, true).size()));
  EXPECT_EQ(c.reused[0], 0);
  EXPECT_GT(c.reused[1], 0) << "the second turn recomputed the whole conversation";

  // The end of input ends it too, with exit 0.
  const Chat eof = chat(kTurn1 + "\n", "");
  EXPECT_EQ(eof.rc, 0) << eof.err;
  EXPECT_EQ(eof.prompts, 2u);
  ASSERT_EQ(eof.answers.size(), 1u);
  EXPECT_EQ(eof.answers[0], c.answers[0]) << "greedy: the same first answer";
}

// The first answer is on stdout while the chat waits for the next line: the input's writer
// waits (up to 60 s) for the second "> " prompt in the output before it sends /exit.
TEST_F(ChatCli, AnswersReachStdoutBeforeTheNextLine) {
  const std::string dir = modeltest::work_dir();
  const std::string out = dir + "/out.txt";
  const std::string writer = "{ printf '%s\\n' '" + kTurn1 + "'; i=0; until [ \"$(grep -c '^> ' " + out +
                             " 2>/dev/null)\" -ge 2 ]; do i=$((i+1)); if [ $i -gt 600 ]; then echo WRITER_TIMED_OUT >&2; break; fi; "
                             "sleep 0.1; done; echo /exit; }";
  const auto r = testutil::run_status(writer + " | " + kCli + " chat -m " + kModel + " -q -t 1 --temp 0 -n 6 --no-think > " +
                                      out + " 2>&1; echo rc=$?");
  EXPECT_NE(r.out.find("rc=0"), std::string::npos) << r.out << testutil::read_file(out);
  EXPECT_EQ(r.out.find("WRITER_TIMED_OUT"), std::string::npos)
      << "the answer did not reach stdout before the input ended:\n" << testutil::read_file(out);
}

TEST_F(ChatCli, CheckpointEveryDecidesWhatTheNextTurnReuses) {
  const std::string input = kTurn1 + "\n" + kTurn2 + "\n/exit\n";
  const std::string flags = "--spec none --max-checkpoints 64 ";
  const Chat none = chat(input, flags);
  ASSERT_EQ(none.rc, 0) << none.err;
  ASSERT_EQ(none.answers.size(), 2u);
  ASSERT_EQ(none.reused.size(), 2u) << none.err;
  // Where turn 1's history ends (the mark `chat` keeps), and what turn 2 shares with the cache
  // (turn 1's prompt, then its answer: the two differ where turn 1 has the think block).
  const std::vector<ChatMessage> first = {{"user", kTurn1}};
  const auto mark = static_cast<long long>(encode(first, false).size());
  const std::vector<Token> p1 = encode(first, true);
  const std::vector<Token> p2 = encode({{"user", kTurn1}, {"assistant", none.answers[0]}, {"user", kTurn2}}, true);
  const auto shared = static_cast<long long>(std::mismatch(p1.begin(), p1.end(), p2.begin(), p2.end()).first - p1.begin());
  ASSERT_GT(shared, mark) << "the template changed: turn 2 shares no more than the history with turn 1";
  ASSERT_LT(shared, static_cast<long long>(p1.size()));
  EXPECT_EQ(none.reused[1], mark) << "--checkpoint-every 0: the history's end";

  const Chat every1 = chat(input, flags + "--checkpoint-every 1");
  ASSERT_EQ(every1.rc, 0) << every1.err;
  ASSERT_EQ(every1.reused.size(), 2u) << every1.err;
  EXPECT_EQ(every1.answers[0], none.answers[0]);
  EXPECT_EQ(every1.reused[1], shared) << "--checkpoint-every 1: a checkpoint at every prompt position";

  // (3: with this prompt and model the three intervals give three different numbers: 11, 16, 15.)
  const Chat every3 = chat(input, flags + "--checkpoint-every 3");
  ASSERT_EQ(every3.rc, 0) << every3.err;
  ASSERT_EQ(every3.reused.size(), 2u) << every3.err;
  EXPECT_EQ(every3.answers[0], none.answers[0]);
  EXPECT_EQ(every3.reused[1], std::max(mark, shared / 3 * 3)) << "shared " << shared << ", mark " << mark;

  // A negative interval is refused by the flag's check.
  const auto bad = testutil::run_status(kCli + " chat -m " + kModel + " --checkpoint-every -1 </dev/null 2>&1");
  EXPECT_NE(bad.rc, 0);
  EXPECT_LT(bad.rc, 128) << bad.out;
  EXPECT_NE(bad.out.find("--checkpoint-every"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace df
