// What a training run prints and writes, the same from bamboo-train and
// bamboo-manager: a progress line and a metrics CSV row per step, a summary,
// and the exit status of a failed run.
#pragma once

#include <string>

#include <caf/error.hpp>

#include "actors/plan/run_record.hpp"
#include "examples/train/cli.hpp"
#include "examples/train/record_file.hpp"

namespace bamboo::app {

class run_report {
public:
  explicit run_report(const cli_options& o) : o_(o) {}
  // Opens the metrics file and the ledger, if any; prints "<program>: error:
  // ..." on failure.
  bool open(const char* program);
  void on_step(const step_record& r);
  // Every step from `to_step` on is undone (a rollback to its checkpoint).
  void on_rollback(std::int64_t to_step, const std::string& why);
  // A new plan from `step` on (a standby worker joined it).
  void on_replan(std::int64_t step, const std::string& why);
  void summary(const run_result& r) const;
  // The --state-digests file: "role,name,count,digest" rows (role owner or shadow,
  // digest in hex); prints "<program>: error: ..." and returns false on failure.
  bool write_digests(const char* program, const run_result& r) const;
  // False after a metrics or ledger write failed (a full disk, say): the run's
  // record is cut, and the program must not exit 0. The failure was printed
  // ("<program>: error: cannot write ...") when it happened.
  bool written() const { return write_error_.empty(); }

private:
  const cli_options& o_;
  bool open_ledger(const char* program);
  // Writes a line; on failure the run's record is cut (written() false).
  void put(record_file& f, const std::string& line, const char* what,
           const std::string& file);
  record_file metrics_;
  record_file ledger_;
  double elapsed_ = 0;
  bool resumed_ = false;
  const char* program_ = "bamboo";
  std::string write_error_;
};

// Prints the failure as one line; 3 for a loss shadows cannot cover, 2 for bad
// input, 1 otherwise.
int failure_status(const char* program, const caf::error& err);

// A run a stop signal ended early (r.stopped_by): says after which step, and
// where its checkpoint is (`checkpoint_dir` empty: none is written); returns
// 128 + the signal's number, as the signal itself would have.
int stopped_status(const char* program, const run_result& r,
                   const std::string& checkpoint_dir);

} // namespace bamboo::app
