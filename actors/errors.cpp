#include "actors/errors.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/exit_reason.hpp>
#include <caf/message.hpp>

namespace bamboo {

const char* to_string(errc e) {
  switch (e) {
  case errc::invalid_config: return "invalid_config";
  case errc::invalid_data: return "invalid_data";
  case errc::stage_failed: return "stage_failed";
  case errc::transport_failure: return "transport_failure";
  case errc::unrecoverable_failure: return "unrecoverable_failure";
  case errc::node_lost: return "node_lost";
  case errc::checkpoint_failed: return "checkpoint_failed";
  case errc::plan_changed: return "plan_changed";
  case errc::connection_refused: return "connection_refused";
  }
  return "unknown";
}

caf::error make_error(errc e) {
  return {static_cast<std::uint8_t>(e), error_category};
}

caf::error make_error(errc e, std::string context) {
  return {static_cast<std::uint8_t>(e), error_category,
          caf::make_message(std::move(context))};
}

namespace {
// The context's first element, when it is the words of the error.
std::string words(const caf::message& ctx) {
  if (ctx.size() > 0 && ctx.match_element<std::string>(0))
    return ": " + ctx.get_as<std::string>(0);
  return "";
}
} // namespace

caf::error make_loss(failover_cause cause, const std::string& detail) {
  std::string text = to_string(cause);
  if (!detail.empty())
    text += " (" + detail + ")";
  return {static_cast<std::uint8_t>(errc::node_lost), error_category,
          caf::make_message(std::move(text), static_cast<std::uint8_t>(cause), detail)};
}

std::optional<loss> loss_of(const caf::error& err) {
  const auto& ctx = err.context();
  if (err.category() != error_category ||
      err.code() != static_cast<std::uint8_t>(errc::node_lost) ||
      !ctx.match_elements<std::string, std::uint8_t, std::string>())
    return std::nullopt;
  return loss{static_cast<failover_cause>(ctx.get_as<std::uint8_t>(1)),
              ctx.get_as<std::string>(2)};
}

bool is_error(const caf::error& err, errc e) {
  return err && err.category() == error_category &&
         err.code() == static_cast<std::uint8_t>(e); // CAF 0.17: no category when empty
}

std::string describe(const caf::error& err) {
  if (err.category() != error_category)
    return caf::to_string(err);
  return to_string(static_cast<errc>(err.code())) + words(err.context());
}

std::string exit_words(const caf::error& reason) {
  if (reason == caf::exit_reason::remote_link_unreachable)
    return "the process died, or its host is unreachable";
  if (reason == caf::exit_reason::user_shutdown)
    return "it was shut down";
  if (reason == caf::exit_reason::kill)
    return "it was killed";
  return describe(reason);
}

void register_errors(caf::actor_system_config& cfg) {
  cfg.add_error_category(error_category,
                         [](std::uint8_t code, caf::atom_value, const caf::message& ctx) {
                           return to_string(static_cast<errc>(code)) + words(ctx);
                         });
}

} // namespace bamboo
