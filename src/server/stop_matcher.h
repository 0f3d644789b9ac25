// Stop sequences over streamed text: the text arrives in pieces (one per token, split at
// arbitrary places), a stop string may straddle any number of pieces, and nothing that
// could still turn out to be the start of a stop string may be released to the client.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace df::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  // Appends a piece. Returns the text that can be released now: everything before the
  // earliest stop string (then stopped() is true and later pieces are ignored), or else
  // everything but the longest tail that is a proper prefix of some stop string.
  std::string push(std::string_view piece);
  // The held-back tail, released at the end of a generation that did not stop on a string.
  std::string flush();
  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }  // the stop string that ended it

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace df::server
