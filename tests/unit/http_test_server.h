// A loopback HTTP/1.1 server for the store's tests: serves byte strings by path with Range
// support (bytes=a-b, bytes=a-), one connection at a time, "Connection: close", and faults
// it can inject into the next requests: a connection dropped after N body bytes, a forced
// status (404, 416, 503...), Range ignored, a wrong Content-Length, a slow (chunked, delayed)
// body. It counts the body bytes it sent.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace df::test {

class TestHttpServer {
 public:
  struct Faults {
    int pass_requests = 0;            // the next N requests are served normally, then the faults apply
    int drop_requests = 0;            // the next N responses close after drop_after body bytes
    uint64_t drop_after = 0;
    int status_requests = 0;          // the next N requests get `status` (no body)
    int status = 0;
    int ignore_range_requests = 0;    // the next N requests get 200 and the whole file
    int wrong_length_requests = 0;    // the next N responses announce Content-Length + delta and
    int64_t content_length_delta = 0; // send min(real, announced) bytes, then close
    int stall_requests = 0;           // the next N responses stop after stall_after body bytes and
    uint64_t stall_after = 0;         // hold the connection open for stall_ms (or until the
    int stall_ms = 0;                 // client hangs up), then close
    int chunk_delay_ms = 0;           // every response: a pause before each chunk (slow server)
    size_t chunk = 64 * 1024;
  };

  TestHttpServer();
  ~TestHttpServer();
  TestHttpServer(const TestHttpServer&) = delete;
  TestHttpServer& operator=(const TestHttpServer&) = delete;

  std::string url(const std::string& path) const;  // http://127.0.0.1:PORT/path
  void serve(const std::string& path, std::shared_ptr<const std::vector<uint8_t>> bytes);
  void set_faults(const Faults& f);

  uint64_t body_bytes_sent() const { return sent_.load(); }
  int requests() const { return requests_.load(); }
  std::vector<std::string> range_headers() const;  // "bytes=..." or "" per request, in order
  void reset_counters();

 private:
  void loop();
  void handle(int fd);
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> sent_{0};
  std::atomic<int> requests_{0};
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const std::vector<uint8_t>>> files_;
  Faults faults_;
  std::vector<std::string> ranges_;
  std::thread thread_;
};

}  // namespace df::test
