#include "kvlm/engine/scheduler.h"

#include <algorithm>
#include <string>

#include "kvlm/base/error.h"

namespace kvlm {
namespace {

EngineOptions checked(const EngineOptions& o) {
  check(o.max_batch >= 1, "max_batch must be at least 1, got " + std::to_string(o.max_batch));
  check(o.prefill_chunk >= 1,
        "prefill_chunk must be at least 1, got " + std::to_string(o.prefill_chunk));
  // Every running sequence decodes one token per step, so the budget must cover a full batch.
  check(o.token_budget >= o.max_batch,
        "token_budget (" + std::to_string(o.token_budget) + ") must be at least max_batch (" +
            std::to_string(o.max_batch) + ")");
  return o;
}

int64_t cache_budget(const KVPool& pool, int64_t requested) {
  if (requested >= 0) return requested;
  // The default: a quarter of the pool may stay cached between requests.
  return int64_t(pool.num_blocks()) * KVPool::bytes_per_block(pool.config()) / 4;
}

}  // namespace

Scheduler::Scheduler(KVPool& pool, const EngineOptions& opts, int64_t context_limit)
    : pool_(pool),
      opts_(checked(opts)),
      context_limit_(context_limit),
      cache_(pool, cache_budget(pool, opts.prompt_cache_bytes)) {}

Scheduler::~Scheduler() {
  // Sequences release their blocks before the cache does; order does not matter for the counts,
  // but every reference must be gone before the pool (owned by the model) is.
  running_.clear();
  waiting_.clear();
  cache_.clear();
}

int32_t Scheduler::blocks_for(int64_t tokens) const {
  const int64_t bs = pool_.block_size();
  return int32_t((tokens + bs - 1) / bs);
}

void Scheduler::check_fits(const Request& r) const {
  const int32_t need = blocks_for(r.reserve_tokens);
  if (need <= pool_.num_blocks()) return;
  const int64_t capacity = int64_t(pool_.num_blocks()) * pool_.block_size();
  throw Error("the request can never fit the KV cache: it needs room for " +
              std::to_string(r.reserve_tokens) + " tokens (prompt " +
              std::to_string(r.prompt_tokens()) + " + max_tokens " +
              std::to_string(r.req.max_tokens) + ", context limit " +
              std::to_string(context_limit_) + "), but the KV pool holds " +
              std::to_string(capacity) + " tokens (" + std::to_string(pool_.num_blocks()) +
              " blocks of " + std::to_string(pool_.block_size()) + ")");
}

void Scheduler::enqueue(std::unique_ptr<Request> r) { waiting_.push_back(std::move(r)); }

int32_t Scheduler::available_blocks() const {
  int32_t promised = 0;
  for (const auto& r : running_) promised += r->outstanding_blocks();
  return pool_.num_free_blocks() - promised;
}

bool Scheduler::try_admit(Request& r) {
  const int32_t bs = pool_.block_size();
  // At least one prompt token must be forwarded to produce the first logits.
  const std::vector<int32_t> shared = cache_.lookup(r.req.prompt, r.prompt_tokens() - 1);
  for (int32_t block : shared) r.kv->append_shared_block(block, bs);
  const int32_t fresh = blocks_for(r.reserve_tokens) - int32_t(shared.size());
  while (available_blocks() < fresh && cache_.evict_one()) {
  }
  if (available_blocks() < fresh) {
    r.kv->clear();
    return false;
  }
  r.shared_blocks = int32_t(shared.size());
  r.reserved_blocks = fresh;
  r.cached_tokens = r.shared_blocks * bs;
  if (cache_.enabled()) {
    ++(shared.empty() ? prefix_stats_.misses : prefix_stats_.hits);
    prefix_stats_.cached_tokens += r.cached_tokens;
  }
  return true;
}

void Scheduler::admit() {
  while (int(running_.size()) < opts_.max_batch && !waiting_.empty()) {
    if (!try_admit(*waiting_.front())) return;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

StepPlan Scheduler::plan() const {
  StepPlan plan;
  int32_t budget = opts_.token_budget;
  // Decodes first: they are never starved, and there are at most max_batch <= token_budget.
  std::vector<int32_t> n_new(running_.size(), 0);
  for (size_t i = 0; i < running_.size(); ++i)
    if (!running_[i]->prefilling()) {
      n_new[i] = running_[i]->pending();
      budget -= n_new[i];
    }
  for (size_t i = 0; i < running_.size(); ++i)
    if (running_[i]->prefilling()) {
      n_new[i] = std::min({running_[i]->pending(), opts_.prefill_chunk, std::max(budget, 0)});
      budget -= n_new[i];
    }
  int32_t rows = 0;
  for (size_t i = 0; i < running_.size(); ++i) {
    if (n_new[i] == 0) continue;
    Request& r = *running_[i];
    const int32_t n_past = r.kv->length();
    plan.batch.tokens.insert(plan.batch.tokens.end(), r.history.begin() + n_past,
                             r.history.begin() + n_past + n_new[i]);
    plan.batch.seqs.push_back({r.kv.get(), n_past, n_new[i]});
    plan.seqs.push_back(&r);
    const bool samples = n_new[i] == r.pending();
    plan.logits_row.push_back(samples ? rows++ : -1);
    if (samples) plan.batch.logit_rows.push_back(int32_t(plan.batch.tokens.size()) - 1);
  }
  return plan;
}

void Scheduler::publish_prompts(const StepPlan& plan) {
  for (Request* r : plan.seqs) {
    if (r->prompt_published || r->prefilling()) continue;
    cache_.insert(r->req.prompt, r->kv->blocks());
    r->prompt_published = true;
  }
}

void Scheduler::hand_off(Request& r) {
  // A failed step may have left the sequence's KV half-written; it is not worth keeping.
  if (r.output.reason() != FinishReason::kError) {
    const std::span<const int32_t> stored(r.history.data(), size_t(r.kv->length()));
    cache_.insert(stored, r.kv->blocks());
  }
  r.kv->clear();
}

std::vector<std::unique_ptr<Request>> Scheduler::retire_finished() {
  std::vector<std::unique_ptr<Request>> done;
  auto take = [&](auto& list) {
    for (auto it = list.begin(); it != list.end();) {
      if ((*it)->finished()) {
        hand_off(**it);
        done.push_back(std::move(*it));
        it = list.erase(it);
      } else {
        ++it;
      }
    }
  };
  take(running_);
  take(waiting_);
  return done;
}

Request* Scheduler::find(RequestId id) {
  for (auto& r : running_)
    if (r->id == id) return r.get();
  for (auto& r : waiting_)
    if (r->id == id) return r.get();
  return nullptr;
}

}  // namespace kvlm
