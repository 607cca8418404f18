// Control frames as plain C++ values, and their Cap'n Proto wire encoding.
// This header is the only view of the wire format the rest of bamboo has; the
// generated capnp code stays inside codec.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace bamboo::schema {

inline constexpr std::uint16_t major_version = 1;
inline constexpr std::uint16_t minor_version = 1;
// Control frames are small; anything bigger is hostile or a bug.
inline constexpr std::size_t default_frame_limit = 1 << 20;

struct heartbeat {
  std::uint32_t node = 0;
  std::uint64_t generation = 0;
  std::uint64_t step = 0;
  std::int64_t time_ms = 0;
};

struct preemption_notice {
  std::uint32_t node = 0;
  std::int64_t deadline_ms = 0;
};

struct join_request {
  std::uint32_t node = 0;
  std::string zone;
  std::string version;
  std::vector<std::uint8_t> proof;
};

struct stage_assignment {
  std::uint32_t pipeline = 0;
  std::uint32_t stage = 0;
  std::uint32_t node = 0;
  std::uint32_t shadow_node = 0;
};

struct plan {
  std::uint64_t generation = 0;
  std::uint32_t pipelines = 0;
  std::uint32_t stages = 0;
  std::vector<stage_assignment> assignments;
  std::string redundancy;
  std::uint32_t global_batch = 0;
  std::uint32_t micro_batch = 0;
  std::uint64_t cursor = 0;
  std::string checkpoint;
};

struct step_report {
  std::uint32_t node = 0;
  std::uint32_t stage = 0;
  std::uint64_t generation = 0;
  std::uint64_t step = 0;
  double loss_sum = 0;
  double grad_squares = 0;
  std::uint32_t forwards = 0;
  std::uint32_t backwards = 0;
  std::uint32_t frc = 0;
  std::uint32_t inherited = 0;
};

struct commit {
  std::uint64_t generation = 0;
  std::uint64_t step = 0;
  double clip_coef = 1.0;
};

struct challenge_request {
  std::uint32_t node = 0xffffffffu;
};

struct join_challenge {
  std::vector<std::uint8_t> nonce;
};

struct join_accept {
  std::uint32_t node = 0;
  std::uint64_t generation = 0;
  std::uint16_t store_port = 0;
};

struct join_refused {
  std::string reason;
};

struct frame_rejected {
  std::string reason;
};

using frame = std::variant<heartbeat, preemption_notice, join_request, plan, step_report,
                           commit, challenge_request, join_challenge, join_accept,
                           join_refused, frame_rejected>;

enum class codec_errc {
  none,
  too_large,     // over the frame size limit
  malformed,     // not a valid Cap'n Proto message
  unknown_major, // written by an incompatible major version
  unknown_body,  // a body kind this reader does not know (newer minor)
};

const char* to_string(codec_errc e);

struct decoded {
  codec_errc error = codec_errc::none;
  std::string detail; // human-readable reason when error != none
  frame value;
  explicit operator bool() const { return error == codec_errc::none; }
};

std::vector<std::uint8_t> encode(const frame& f);
decoded decode(const std::uint8_t* data, std::size_t size,
               std::size_t limit = default_frame_limit);
inline decoded decode(const std::vector<std::uint8_t>& bytes,
                      std::size_t limit = default_frame_limit) {
  return decode(bytes.data(), bytes.size(), limit);
}

} // namespace bamboo::schema
