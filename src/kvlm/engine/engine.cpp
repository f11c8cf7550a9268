#include "kvlm/engine/engine.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <span>
#include <thread>

#include "kvlm/backend/ops.h"
#include "kvlm/base/error.h"
#include "kvlm/base/log.h"
#include "kvlm/base/thread_pool.h"
#include "kvlm/engine/generate.h"
#include "kvlm/engine/request.h"
#include "kvlm/engine/scheduler.h"

namespace kvlm {
namespace {

std::string describe_exception(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "unknown exception";
  }
}

}  // namespace

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
    case FinishReason::kNone: break;
  }
  return "none";
}

struct Engine::Impl {
  Impl(std::shared_ptr<Model> m, std::shared_ptr<const Tokenizer> t, const EngineOptions& o)
      : model(std::move(m)),
        tokenizer(std::move(t)),
        eos_ids(stop_token_ids(model->config(), *tokenizer)),
        sched(model->kv_pool(), o, model->config().max_position_embeddings) {}

  // Declared first so that it outlives the scheduler, whose sequences hold blocks of its pool.
  std::shared_ptr<Model> model;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::vector<int32_t> eos_ids;
  Scheduler sched;  // engine thread only

  // Shared with client threads.
  mutable std::mutex mu;
  std::condition_variable wake;
  std::deque<std::unique_ptr<Request>> incoming;
  std::vector<RequestId> cancels;
  RequestId next_id = 1;
  bool stopping = false;
  bool finish_running = false;
  EngineStats published;

  std::mutex join_mu;  // serialises shutdown() callers
  std::thread thread;

  // Engine-thread counters, copied into `published` after every iteration.
  int64_t generated_total = 0;
  int64_t steps = 0;
  double last_step_ms = 0;

  void run();
  void step();
  void step_contained();
  void sample_all(const StepPlan& plan, const Tensor& logits);
  void deliver(Request& r, TokenEvent ev);
  void finish(Request& r, FinishReason reason, std::string error = {});
  void publish();
};

void Engine::Impl::deliver(Request& r, TokenEvent ev) {
  r.stamp(ev);
  if (ev.token >= 0) ++generated_total;
  const bool final = ev.finished;
  try {
    if (r.on_token) r.on_token(ev);
  } catch (...) {
    // A throwing callback ends its own request only; the final event reports why. If that
    // delivery throws too, there is nobody left to tell.
    if (!final) finish(r, FinishReason::kError,
                       "the token callback threw: " + describe_exception(std::current_exception()));
  }
}

void Engine::Impl::finish(Request& r, FinishReason reason, std::string error) {
  if (r.finished()) return;
  deliver(r, r.output.end(reason, std::move(error)));
}

void Engine::Impl::sample_all(const StepPlan& plan, const Tensor& logits) {
  const int64_t vocab = logits.dim(-1);
  const float* data = logits.data<float>();
  // Each request's sample depends only on its own logits, history, seed and step, so the requests
  // are sampled in parallel; their tokens are then delivered one by one in plan order.
  struct Sampled {
    Request* request = nullptr;
    SampleResult result;
    std::exception_ptr error;
  };
  std::vector<Sampled> sampled;
  std::vector<int32_t> rows;
  for (size_t i = 0; i < plan.seqs.size(); ++i)
    if (plan.logits_row[i] >= 0 && !plan.seqs[i]->finished()) {
      sampled.push_back({plan.seqs[i], {}, nullptr});
      rows.push_back(plan.logits_row[i]);
    }
  ops::thread_pool().parallel_for(sampled.size(), 1, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      Request& r = *sampled[i].request;
      try {
        const std::span<const float> row_logits(data + int64_t(rows[i]) * vocab, size_t(vocab));
        sampled[i].result = r.sampler.sample(row_logits, r.history, r.step);
      } catch (...) {
        sampled[i].error = std::current_exception();
      }
    }
  });
  for (Sampled& s : sampled) {
    Request& r = *s.request;
    ++r.step;
    try {
      if (s.error) std::rethrow_exception(s.error);
      TokenEvent ev = r.output.accept(s.result, r.kv->length());
      if (ev.token >= 0) r.history.push_back(ev.token);
      deliver(r, std::move(ev));
    } catch (...) {
      finish(r, FinishReason::kError, describe_exception(std::current_exception()));
    }
  }
}

void Engine::Impl::step() {
  sched.admit();
  const StepPlan plan = sched.plan();
  if (plan.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  Tensor logits;
  try {
    logits = model->forward(plan.batch);
    // Without wanted rows (every sequence mid-prefill) the model returns each sequence's last row.
    const size_t rows = plan.batch.logit_rows.empty() ? plan.seqs.size() : plan.batch.logit_rows.size();
    check(logits.dtype() == DType::kF32 && logits.is_contiguous() && logits.dim(0) == int64_t(rows),
          "the model returned logits of an unexpected shape: " + logits.describe());
  } catch (...) {
    // The step's sequences may hold half-written KV: all of them fail, the engine goes on.
    const std::string why = describe_exception(std::current_exception());
    log_error("engine step failed for " + std::to_string(plan.seqs.size()) + " sequences: " + why);
    for (Request* r : plan.seqs) finish(*r, FinishReason::kError, why);
    sched.retire_finished();
    return;
  }
  sched.publish_prompts(plan);
  sample_all(plan, logits);
  sched.retire_finished();
  ++steps;
  last_step_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

void Engine::Impl::step_contained() {
  try {
    step();
  } catch (...) {
    // Model errors are handled inside step(); anything else escaping it is a fault of the
    // scheduling itself. Failing the running requests keeps the process and the engine alive.
    const std::string why = describe_exception(std::current_exception());
    log_error("engine step failed: " + why);
    for (const auto& r : sched.running()) finish(*r, FinishReason::kError, why);
    sched.retire_finished();
  }
}

void Engine::Impl::publish() {
  const KVPool& pool = model->kv_pool();
  const int64_t block_bytes = KVPool::bytes_per_block(pool.config());
  const PrefixStats& ps = sched.prefix_stats();
  std::lock_guard<std::mutex> lock(mu);
  EngineStats& s = published;
  s.running = int(sched.running().size());
  s.waiting = int(sched.waiting().size() + incoming.size());
  s.generated_tokens_total = generated_total;
  s.prefix_hits = ps.hits;
  s.prefix_misses = ps.misses;
  s.prefix_cached_tokens = ps.cached_tokens;
  s.kv_blocks_total = pool.num_blocks();
  s.kv_blocks_free = pool.num_free_blocks();
  s.kv_bytes_total = int64_t(s.kv_blocks_total) * block_bytes;
  s.kv_bytes_used = int64_t(s.kv_blocks_total - s.kv_blocks_free) * block_bytes;
  s.prefix_cache_bytes = sched.prefix_cache().bytes();
  s.last_step_ms = last_step_ms;
  s.steps = steps;
}

void Engine::Impl::run() {
  for (;;) {
    std::vector<RequestId> to_cancel;
    bool stop = false, drain = false;
    {
      std::unique_lock<std::mutex> lock(mu);
      wake.wait(lock, [&] {
        return !incoming.empty() || !cancels.empty() || stopping || sched.has_work();
      });
      while (!incoming.empty()) {
        sched.enqueue(std::move(incoming.front()));
        incoming.pop_front();
      }
      to_cancel.swap(cancels);
      stop = stopping;
      drain = finish_running;
    }
    for (RequestId id : to_cancel)
      if (Request* r = sched.find(id)) finish(*r, FinishReason::kCancelled);
    if (stop) {
      // Shutting down admits nothing more; running requests finish only when asked to.
      for (const auto& r : sched.waiting()) finish(*r, FinishReason::kCancelled);
      if (!drain)
        for (const auto& r : sched.running()) finish(*r, FinishReason::kCancelled);
    }
    sched.retire_finished();
    if (stop && !sched.has_work()) break;
    if (sched.has_work()) step_contained();
    publish();
  }
  publish();
}

Engine::Engine(std::shared_ptr<Model> model, std::shared_ptr<const Tokenizer> tokenizer,
               EngineOptions opts) {
  check(model != nullptr, "Engine: no model");
  check(tokenizer != nullptr, "Engine: no tokenizer");
  impl_ = std::make_unique<Impl>(std::move(model), std::move(tokenizer), opts);
  impl_->publish();
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

Engine::~Engine() { shutdown(false); }

RequestId Engine::submit(GenerationRequest req, TokenCallback on_token) {
  Impl& im = *impl_;
  const ModelConfig& config = im.model->config();
  validate_request(req, config);
  const int32_t prompt_tokens = int32_t(req.prompt.size());
  std::lock_guard<std::mutex> lock(im.mu);
  check(!im.stopping, "the engine is shut down; no new requests are accepted");
  auto r = std::make_unique<Request>(im.next_id, std::move(req), std::move(on_token),
                                     im.model->kv_pool(), *im.tokenizer, im.eos_ids, config);
  im.sched.check_fits(*r);
  const RequestId id = im.next_id++;
  im.incoming.push_back(std::move(r));
  ++im.published.requests_total;
  im.published.prompt_tokens_total += prompt_tokens;
  ++im.published.waiting;
  im.wake.notify_one();
  return id;
}

void Engine::cancel(RequestId id) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->cancels.push_back(id);
  impl_->wake.notify_one();
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->published;
}

void Engine::shutdown(bool finish_running) {
  std::lock_guard<std::mutex> join_lock(impl_->join_mu);
  if (!impl_->thread.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
    impl_->finish_running = finish_running;
    impl_->wake.notify_one();
  }
  impl_->thread.join();
}

const ModelConfig& Engine::model_config() const { return impl_->model->config(); }

struct TokenStream::State {
  std::mutex mu;
  std::condition_variable ready;
  std::deque<TokenEvent> events;
  bool final_queued = false;    // the engine delivered the final event
  bool final_returned = false;  // next() handed it out
};

TokenStream::TokenStream(Engine& engine, GenerationRequest req)
    : engine_(&engine), state_(std::make_shared<State>()) {
  // The callback holds the state, so events arriving after this stream is gone are harmless.
  id_ = engine.submit(std::move(req), [state = state_](const TokenEvent& ev) {
    std::lock_guard<std::mutex> lock(state->mu);
    state->events.push_back(ev);
    state->final_queued = state->final_queued || ev.finished;
    state->ready.notify_one();
  });
}

TokenStream::~TokenStream() {
  bool done;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    done = state_->final_queued;
  }
  if (!done) engine_->cancel(id_);
}

std::optional<TokenEvent> TokenStream::next() {
  std::unique_lock<std::mutex> lock(state_->mu);
  if (state_->final_returned) return std::nullopt;
  state_->ready.wait(lock, [&] { return !state_->events.empty(); });
  TokenEvent ev = std::move(state_->events.front());
  state_->events.pop_front();
  state_->final_returned = ev.finished;
  return ev;
}

void TokenStream::cancel() { engine_->cancel(id_); }

}  // namespace kvlm
