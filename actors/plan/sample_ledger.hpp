// The exactly-once ledger: one line per committed step (its step, generation,
// the positions of the sample order it took and the plan it ran under) and
// one per rollback to a checkpoint, appended as the run goes; and the proof,
// from such a file alone, that every sample of each epoch was used exactly
// once by the steps that stand. Plain code, tested without actors.
//
// Format (CSV, one entry a line):
//   # bamboo ledger v1,seed=S,samples_per_epoch=N,global_batch=G
//   commit,STEP,GENERATION,FIRST,END,OWNERS,SHADOWS
//   rollback,TO_STEP,REASON
// FIRST..END are positions of the sample order (step k: [k*G, (k+1)*G));
// OWNERS and SHADOWS list the node of each stage and of its shadow, separated
// by spaces, "-" for none. A rollback undoes every standing step >= TO_STEP.
// A restarted run appends to the same file, repeating an equal header.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace bamboo {

// The most samples an epoch (or a global batch) may have in a ledger: a
// larger number in a file is refused, not allocated for.
inline constexpr std::int64_t max_ledger_samples = std::int64_t{1} << 27;
// The samples and positions a ledger of `bytes` may make verification touch:
// 4,096 a byte (a commit line of ~40 bytes vouches for a batch of up to
// ~160,000), and never less than 2^24.
inline constexpr std::int64_t ledger_work_budget(std::int64_t bytes) {
  return bytes * 4096 > (std::int64_t{1} << 24) ? bytes * 4096 : std::int64_t{1} << 24;
}

struct ledger_header {
  std::uint64_t seed = 0;
  std::int64_t samples_per_epoch = 0;
  std::int64_t global_batch = 0;
};

struct ledger_commit {
  std::int64_t step = 0;
  std::uint64_t generation = 0;
  std::int64_t first = 0, end = 0; // positions [first, end)
  std::vector<int> owners, shadows;
};

struct ledger_rollback {
  std::int64_t to_step = 0;
  std::string reason;
};

std::string format_header(const ledger_header& h);
std::string format_commit(const ledger_commit& c);
std::string format_rollback(const ledger_rollback& r);

using ledger_entry = std::variant<ledger_commit, ledger_rollback>;

struct ledger_file {
  ledger_header header;
  std::vector<ledger_entry> entries;
};

// Reads a whole ledger; nullopt and `error` ("line 7: ...") on a malformed
// line, a missing or changed header.
std::optional<ledger_file> parse_ledger(std::istream& in, std::string& error);

struct ledger_verdict {
  std::int64_t committed = 0;   // steps that stand
  std::int64_t rolled_back = 0; // commits undone by rollbacks
  std::int64_t rollbacks = 0;
  std::vector<std::string> problems; // empty: every sample exactly once
  std::vector<std::string> epochs;   // "epoch 0: 96 of 1234 samples, each once"
  std::vector<std::string> plans;    // "steps 3-7, generation 2: owners ..."
  bool ok() const { return problems.empty(); }
};

// `sample_at(position)`: the sample the run's order puts at a position (the
// verifier recomputes it from the header's seed and epoch size).
ledger_verdict verify_ledger(const ledger_file& f,
                             const std::function<std::int64_t(std::int64_t)>& sample_at);

} // namespace bamboo
