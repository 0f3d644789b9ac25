// Qwen ChatML prompt (the layout of the Qwen3 / Qwen3.5 chat templates for plain text
// messages; tools and images are not handled here).
#include "tokenizer/tokenizer.h"

namespace df {

std::string chat_prompt(const std::vector<ChatMessage>& messages, bool add_assistant, bool think) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out += "<|im_start|>";
    out += m.role;
    out += '\n';
    out += m.content;
    out += "<|im_end|>\n";
  }
  if (add_assistant) {
    out += "<|im_start|>assistant\n";
    out += think ? "<think>\n" : "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace df
