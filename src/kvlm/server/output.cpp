#include "kvlm/server/output.h"

#include <algorithm>
#include <array>

namespace kvlm::server {

namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
// The openings of the tool-call formats text/tool_calls.h parses.
constexpr std::array<std::string_view, 4> kToolMarkers = {"<tool_call>", "<function",
                                                          "[TOOL_CALLS]", "<|python_tag|>"};

// Length of the longest tail of `text` that is a proper prefix of `marker`.
size_t partial_tail(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(marker.size() - 1, text.size()); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

bool all_space(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; });
}

}  // namespace

OutputSplitter::OutputSplitter(bool tools, bool reasoning, bool starts_in_reasoning)
    : tools_(tools),
      reasoning_(reasoning),
      mode_(reasoning && starts_in_reasoning ? Mode::kReasoning : Mode::kContent) {}

OutputDelta OutputSplitter::push(std::string_view text) {
  pending_ += text;
  return drain(false);
}

OutputDelta OutputSplitter::finish() {
  OutputDelta d = drain(true);
  if (withheld_.empty()) return d;
  ParsedOutput parsed = parse_tool_calls(withheld_);
  if (parsed.tool_calls.empty()) {
    d.content += withheld_;  // not a call after all: the model's text, unchanged
  } else {
    d.content += parsed.content;
    d.reasoning += parsed.reasoning;
    tool_calls_ = std::move(parsed.tool_calls);
  }
  withheld_.clear();
  return d;
}

OutputDelta OutputSplitter::drain(bool final) {
  OutputDelta d;
  for (bool more = true; more;) {
    switch (mode_) {
      case Mode::kWithheld:
        withheld_ += pending_;
        pending_.clear();
        more = false;
        break;
      case Mode::kReasoning:
        more = step_reasoning(d, final);
        break;
      case Mode::kContent:
        more = step_content(d, final);
        break;
    }
  }
  return d;
}

bool OutputSplitter::step_reasoning(OutputDelta& d, bool final) {
  const size_t close = pending_.find(kThinkClose);
  if (close != std::string::npos) {
    d.reasoning += pending_.substr(0, close);
    pending_.erase(0, close + kThinkClose.size());
    mode_ = Mode::kContent;
    return true;
  }
  const size_t keep = final ? 0 : partial_tail(pending_, kThinkClose);
  d.reasoning += pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return false;
}

bool OutputSplitter::step_content(OutputDelta& d, bool final) {
  if (tools_ && !content_started_) {
    // Llama 3 answers a tool call with bare JSON as its whole output; leading whitespace is
    // held until the first real character shows which kind of answer this is.
    const size_t first = pending_.find_first_not_of(" \n\t\r");
    if (first == std::string::npos) {
      if (final) {
        d.content += pending_;
        pending_.clear();
      }
      return false;
    }
    if (pending_[first] == '{') {
      mode_ = Mode::kWithheld;
      return true;
    }
  }
  size_t at = std::string::npos;
  std::string_view found;
  auto consider = [&](std::string_view marker) {
    const size_t pos = pending_.find(marker);
    if (pos < at) at = pos, found = marker;
  };
  if (reasoning_) consider(kThinkOpen);
  if (tools_)
    for (auto m : kToolMarkers) consider(m);
  if (at != std::string::npos) {
    const std::string before = pending_.substr(0, at);
    d.content += before;
    content_started_ = content_started_ || !all_space(before);
    if (found == kThinkOpen) {
      pending_.erase(0, at + kThinkOpen.size());
      mode_ = Mode::kReasoning;
    } else {
      pending_.erase(0, at);
      mode_ = Mode::kWithheld;
    }
    return true;
  }
  size_t keep = 0;
  if (!final) {
    if (reasoning_) keep = partial_tail(pending_, kThinkOpen);
    if (tools_)
      for (auto m : kToolMarkers) keep = std::max(keep, partial_tail(pending_, m));
  }
  const std::string out = pending_.substr(0, pending_.size() - keep);
  d.content += out;
  content_started_ = content_started_ || !all_space(out);
  pending_.erase(0, pending_.size() - keep);
  return false;
}

std::string FinalOutput::openai_finish_reason() const {
  if (!tool_calls.empty()) return "tool_calls";
  return reason == FinishReason::kLength ? "length" : "stop";
}

std::string FinalOutput::anthropic_stop_reason() const {
  if (!tool_calls.empty()) return "tool_use";
  if (reason == FinishReason::kLength) return "max_tokens";
  if (stop_sequence) return "stop_sequence";
  return "end_turn";
}

OutputCollector::OutputCollector(const Tokenizer& tokenizer, OutputOptions options)
    : tokenizer_(tokenizer),
      options_(std::move(options)),
      splitter_(options_.tools, options_.reasoning, options_.starts_in_reasoning) {}

TopLogprob OutputCollector::describe(int32_t token, float logprob) const {
  const int32_t ids[1] = {token};
  return TopLogprob{token, tokenizer_.decode(ids, false), tokenizer_.id_to_token(token), logprob};
}

const LogprobEntry* OutputCollector::last_logprobs() const {
  return last_had_token_ && options_.logprobs && !out_.logprobs.empty() ? &out_.logprobs.back()
                                                                          : nullptr;
}

OutputDelta OutputCollector::on_event(const TokenEvent& ev) {
  last_had_token_ = ev.token >= 0;
  if (ev.token >= 0) {
    tokens_.push_back(ev.token);
    if (options_.logprobs) {
      LogprobEntry entry{describe(ev.token, ev.logprob), {}};
      for (const TokenLogprob& t : ev.top_logprobs) entry.top.push_back(describe(t.token, t.logprob));
      out_.logprobs.push_back(std::move(entry));
    }
  }
  out_.usage = Usage{ev.prompt_tokens, ev.completion_tokens, ev.cached_tokens};
  OutputDelta d = splitter_.push(ev.text);
  if (!ev.finished) {
    out_.content += d.content;
    out_.reasoning += d.reasoning;
    return d;
  }
  OutputDelta last = splitter_.finish();
  d.content += last.content;
  d.reasoning += last.reasoning;
  out_.content += d.content;
  out_.reasoning += d.reasoning;
  out_.tool_calls = splitter_.tool_calls();
  out_.reason = ev.reason;
  out_.error = ev.error;
  finished_ = true;
  finalize();
  return d;
}

void OutputCollector::finalize() {
  if (out_.reason != FinishReason::kStop || options_.stop.empty()) return;
  // The engine cuts at the first stop string it sees, so if the decoded generation contains
  // one, the earliest is the one that ended it; otherwise an EOS token did.
  const std::string text = tokenizer_.decode(tokens_, true);
  size_t best = std::string::npos;
  for (const std::string& s : options_.stop) {
    const size_t pos = text.find(s);
    if (pos < best) best = pos, out_.stop_sequence = s;
  }
}

}  // namespace kvlm::server
