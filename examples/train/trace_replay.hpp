// A spot-instance trace replayed on worker processes (bamboo-train --processes
// --spot-trace): the trace's instances are mapped onto at most `max_workers`
// worker slots, first come first served: an instance added while every slot is
// taken is left out, and so is its removal; a removed instance frees its slot
// for the next one added. Trace time is divided by `speedup`. Plain code: the
// launcher turns its actions into processes and signals.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "examples/sim/trace.hpp"

namespace bamboo::app {

struct replay_action {
  bool start = true; // else the instance is removed: its worker goes
  int slot = 0;
  std::string instance; // the trace's name for it
  std::int64_t trace_ms = 0;
};

class trace_replay {
public:
  trace_replay(std::vector<sim::trace_event> events, int max_workers, double speedup);
  // The instances of time 0: the workers the run starts with (slots 0..n-1).
  int initial_workers() const { return initial_; }
  // The actions due `elapsed` (wall time) after the run started, each once.
  std::vector<replay_action> due(std::chrono::duration<double> elapsed);
  // For the summary.
  int starts() const { return starts_; }
  int removals() const { return removals_; }
  int left_out() const { return left_out_; } // events of instances with no slot
  std::int64_t replayed_ms() const { return last_ms_; } // trace time reached
  std::int64_t trace_ms() const { return events_.empty() ? 0 : events_.back().ms; }

private:
  std::vector<replay_action> apply(std::size_t upto_ms_inclusive, bool initial);
  std::vector<sim::trace_event> events_;
  std::vector<std::string> slot_; // instance in each slot, empty when free
  double speedup_;
  std::size_t next_ = 0;
  int initial_ = 0, starts_ = 0, removals_ = 0, left_out_ = 0;
  std::int64_t last_ms_ = 0;
};

} // namespace bamboo::app
