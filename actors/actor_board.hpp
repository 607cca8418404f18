// Every actor of this process, as bamboo-inspect lists it: each actor enters
// itself (an entry that leaves when the actor's state goes) and says what it is
// doing as it goes: a stage before each instruction, the manager at each step.
// The mailbox depth is the one the actor itself last saw (only the owner may
// look at a CAF mailbox). Read by the gateway for observers, and by a worker's
// agent, whose heartbeats carry the rows to the manager. Locked: the actors
// write from their own threads. Tested without actors.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "schema/codec.hpp"

namespace bamboo {

class actor_board : public std::enable_shared_from_this<actor_board> {
public:
  using clock = std::chrono::steady_clock;
  // Rows past this many are not kept (a process has a handful of actors).
  static constexpr std::size_t max_rows = 64;

  // An actor's place on the board; it leaves when destroyed. Empty (all calls
  // do nothing) when default-made or when the board was full.
  class entry {
  public:
    entry() = default;
    entry(std::shared_ptr<actor_board> board, int id)
        : board_(std::move(board)), id_(id) {}
    entry(entry&& other) noexcept { *this = std::move(other); }
    entry& operator=(entry&& other) noexcept;
    entry(const entry&) = delete;
    entry& operator=(const entry&) = delete;
    ~entry();
    void set(const std::string& state, const std::string& doing, std::size_t mailbox,
             clock::time_point now = clock::now());
    void set_stage(int stage);
    explicit operator bool() const { return board_ != nullptr; }

  private:
    std::shared_ptr<actor_board> board_;
    int id_ = -1;
  };

  // Held by shared_ptr (entries keep the board alive).
  static std::shared_ptr<actor_board> make() {
    return std::shared_ptr<actor_board>(new actor_board());
  }

  entry enter(const std::string& kind, int node, int stage, const std::string& state,
              clock::time_point now = clock::now());
  // Sorted by node, then kind order (manager, gateway, agent, detector, stage,
  // shadow), then stage; age_ms counts from each row's last set.
  std::vector<schema::actor_row> rows(clock::time_point now = clock::now()) const;
  // The same rows with `node` set (a worker's rows carry its member number).
  static std::vector<schema::actor_row> renumbered(std::vector<schema::actor_row> rows,
                                                   int node);

private:
  actor_board() = default;
  struct row {
    schema::actor_row value;
    clock::time_point updated;
  };
  void set(int id, const std::string& state, const std::string& doing,
           std::size_t mailbox, clock::time_point now);
  void set_stage(int id, int stage);
  void leave(int id);

  mutable std::mutex mtx_;
  std::map<int, row> rows_;
  int next_id_ = 0;
};

} // namespace bamboo
