#include "server/api_error.h"

namespace df::server {

std::string ApiError::type() const {
  if (status == 401) return "authentication_error";
  if (status == 503) return "unavailable_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

nlohmann::json ApiError::to_json() const {
  nlohmann::json e = {{"message", what()}, {"type", type()}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  return {{"error", e}};
}

}  // namespace df::server
