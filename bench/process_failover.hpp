// Multi-process failover latency: bamboo-train --processes (GPT, S=4), a worker
// killed with kill -9 at a random point of a step, measured from the kill to
// the failover step's completion line, next to the fault-free step time.
#pragma once

namespace bamboo::bench {

// Prints the figures; returns false when a run did not go as it should.
bool process_failover(const char* train_bin, int rounds);

} // namespace bamboo::bench
