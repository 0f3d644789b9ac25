// Error type used across the engine: every user-facing failure (bad file, bad flag,
// prompt past the context) is thrown as df::Error with a message that names the problem.
#pragma once
#include <stdexcept>
#include <string>

namespace df {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace df
