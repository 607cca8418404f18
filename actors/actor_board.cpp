#include "actors/actor_board.hpp"

#include <algorithm>
#include <limits>
#include <tuple>

namespace bamboo {

actor_board::entry& actor_board::entry::operator=(entry&& other) noexcept {
  if (this != &other) {
    if (board_)
      board_->leave(id_);
    board_ = std::move(other.board_);
    id_ = other.id_;
    other.board_.reset();
  }
  return *this;
}

actor_board::entry::~entry() {
  if (board_)
    board_->leave(id_);
}

void actor_board::entry::set(const std::string& state, const std::string& doing,
                             std::size_t mailbox, clock::time_point now) {
  if (board_)
    board_->set(id_, state, doing, mailbox, now);
}

void actor_board::entry::set_stage(int stage) {
  if (board_)
    board_->set_stage(id_, stage);
}

actor_board::entry actor_board::enter(const std::string& kind, int node, int stage,
                                      const std::string& state, clock::time_point now) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (rows_.size() >= max_rows)
    return {};
  const int id = next_id_++;
  schema::actor_row r;
  r.kind = kind;
  r.node = node;
  r.stage = stage;
  r.state = state;
  r.doing = "starting";
  rows_[id] = {r, now};
  return entry(shared_from_this(), id);
}

void actor_board::set(int id, const std::string& state, const std::string& doing,
                      std::size_t mailbox, clock::time_point now) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto it = rows_.find(id);
  if (it == rows_.end())
    return;
  it->second.value.state = state;
  it->second.value.doing = doing;
  it->second.value.mailbox = static_cast<std::uint32_t>(
      std::min<std::size_t>(mailbox, std::numeric_limits<std::uint32_t>::max()));
  it->second.updated = now;
}

void actor_board::set_stage(int id, int stage) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto it = rows_.find(id);
  if (it != rows_.end())
    it->second.value.stage = stage;
}

void actor_board::leave(int id) {
  std::lock_guard<std::mutex> guard{mtx_};
  rows_.erase(id);
}

namespace {
int kind_order(const std::string& kind) {
  static const char* order[] = {"manager",  "gateway", "agent",
                                "detector", "stage",   "shadow"};
  for (int i = 0; i < 6; ++i)
    if (kind == order[i])
      return i;
  return 6;
}
} // namespace

std::vector<schema::actor_row> actor_board::rows(clock::time_point now) const {
  std::vector<schema::actor_row> out;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (const auto& [id, r] : rows_) {
      out.push_back(r.value);
      out.back().age_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(now - r.updated).count();
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    const int ka = kind_order(a.kind), kb = kind_order(b.kind);
    return std::tie(a.node, ka, a.stage) < std::tie(b.node, kb, b.stage);
  });
  return out;
}

std::vector<schema::actor_row>
actor_board::renumbered(std::vector<schema::actor_row> rows, int node) {
  for (auto& r : rows)
    r.node = node;
  return rows;
}

} // namespace bamboo
