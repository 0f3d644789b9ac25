// An error answered to an HTTP client as OpenAI does: a 4xx/5xx status and
//   {"error": {"message": ..., "type": ..., "param": ... | null, "code": ... | null}}
#pragma once
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace df::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = {}, std::string code = {})
      : std::runtime_error(message), status(status), param(std::move(param)), code(std::move(code)) {}
  int status;
  std::string param;  // the request field at fault (empty: none)
  std::string code;   // OpenAI's machine-readable code (empty: null)
  // invalid_request_error (400/404/413/422), authentication_error (401), server_error (5xx)
  std::string type() const;
  nlohmann::json to_json() const;
};

}  // namespace df::server
