// `diskformer serve`: an OpenAI-compatible HTTP server (chat completions, completions,
// models, health, metrics) over N slots decoded together. SIGINT / SIGTERM stop accepting,
// let what is in flight finish (up to --shutdown-grace seconds, then cancel it) and exit 0.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "../common.h"
#include "../spec_flags.h"
#include "common/error.h"
#include "http_api.h"
#include "server/scheduler.h"

namespace df::cli {

void register_serve(CLI::App& app) {
  struct Flags {
    ModelFlags model;
    server::HttpOptions http;
    int parallel = 4;
    int step_rows = 8;
    double time_limit_s = 600;
    double grace_s = 10;
    int64_t n_predict = -1;
    SpecFlags spec;
  };
  auto f = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (chat completions, completions, models)");
  add_model_flags(*cmd, f->model);
  cmd->add_option("--host", f->http.host, "address to listen on");
  cmd->add_option("--port", f->http.port, "port to listen on (0: any free port, printed)")->check(CLI::Range(0, 65535));
  cmd->add_option("-P,--parallel", f->parallel, "slots: sequences decoded together, each with its own cache (-c each)")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--step-rows", f->step_rows,
                  "most slots in one decode forward; more active slots take several forwards per step (CPU: "
                  "rows up to 8 are computed with the same bits whatever their neighbours)")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--api-key", f->http.api_key, "require 'Authorization: Bearer KEY' on /v1/*");
  cmd->add_option("--alias", f->http.aliases, "another name clients may use in 'model' (repeatable)");
  cmd->add_option("--threads-http", f->http.http_threads,
                  "HTTP worker threads; each open connection holds one (0: max(64, 2 * parallel + 16))")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-body", f->http.max_body_bytes, "largest request body in bytes (larger: 413)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--keep-alive", f->http.keep_alive_s,
                  "seconds an idle keep-alive connection stays open (cpp-httplib waits for them on exit)")
      ->check(CLI::Range(1, 3600));
  cmd->add_option("--time-limit", f->time_limit_s,
                  "seconds a request may take, queue included; past it the generation ends with finish_reason "
                  "'length' (0: none)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--shutdown-grace", f->grace_s, "on SIGINT/SIGTERM: seconds to let running requests finish")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-n,--n-predict", f->n_predict, "default max_tokens of a request (-1: until the context ends)")
      ->check(CLI::Range(int64_t{-1}, INT64_MAX));
  cmd->add_flag("--log-requests", f->http.log_requests, "print one line per request on stderr");
  add_spec_flags(*cmd, f->spec);  // greedy requests (temperature 0) of a slot decoding alone
  cmd->callback([f] {
    // SIGINT/SIGTERM are taken by one thread through sigwait; every thread started from
    // here on (compute pool, decode loop, HTTP workers) inherits the blocked mask.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGUSR1);  // internal: the server stopped on its own
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
    signal(SIGPIPE, SIG_IGN);

    auto engine = load_engine(f->model);
    const std::string path = engine->options().model_path;  // -m resolved (a stored name with --store too)
    server::HttpOptions http = f->http;
    http.model_id = std::filesystem::path(path).stem().string();
    http.aliases.insert(http.aliases.begin(), "diskformer");
    http.defaults.model_names = {http.model_id};
    http.defaults.model_names.insert(http.defaults.model_names.end(), http.aliases.begin(), http.aliases.end());
    http.defaults.sampling = SamplerOptions{.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f};
    http.defaults.max_tokens = f->n_predict;
    http.time_limit = std::chrono::milliseconds(static_cast<int64_t>(f->time_limit_s * 1000));

    // --spec auto: MTP drafts for greedy requests when the model has a head (sampled ones decode plainly)
    const spec::SpecOptions so = to_spec_options(f->spec, 0.0f, *engine);
    server::Scheduler sched(*engine, {.n_slots = f->parallel, .step_rows = f->step_rows, .spec = so});
    server::HttpApi api(sched, http);
    const int port = api.bind();
    std::printf("diskformer: serving '%s' (%s, %d slots x %lld tokens%s) on http://%s:%d\n", http.model_id.c_str(),
                engine->info().arch.c_str(), f->parallel, static_cast<long long>(engine->options().n_ctx),
                so.mode == spec::SpecMode::MTP
                    ? (", greedy requests with MTP drafts of up to " + std::to_string(so.draft_max)).c_str()
                    : "",
                http.host.c_str(), port);
    std::fflush(stdout);

    const auto grace = std::chrono::milliseconds(static_cast<int64_t>(f->grace_s * 1000));
    std::atomic<bool> listen_returned{false};
    std::thread signals([&] {
      int sig = 0;
      sigwait(&sigs, &sig);
      if (sig != SIGUSR1 && !f->model.quiet)
        std::fprintf(stderr, "diskformer: %s: finishing requests in flight, then exiting\n", strsignal(sig));
      api.begin_shutdown();
      sched.shutdown(grace);
      api.wait_replies(grace + std::chrono::seconds(2));  // the last chunks reach the clients
      // A signal that comes before listen() has started (right after the line above, on a busy
      // machine) would find nothing to stop: cpp-httplib's stop() is a no-op until the server
      // runs, and listen() would then serve forever. Wait for it to run (or to have returned).
      while (!api.running() && !listen_returned.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      api.stop();
    });
    const bool ok = api.listen();
    listen_returned = true;
    pthread_kill(signals.native_handle(), SIGUSR1);  // no effect once the thread has returned
    signals.join();
    if (!ok) throw Error("the HTTP server stopped unexpectedly");
  });
}

}  // namespace df::cli
