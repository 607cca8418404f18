#include "actors/errors.hpp"

#include <caf/actor_system_config.hpp>
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

std::string describe(const caf::error& err) {
  if (err.category() != error_category)
    return caf::to_string(err);
  std::string out = to_string(static_cast<errc>(err.code()));
  if (err.context().match_elements<std::string>())
    out += ": " + err.context().get_as<std::string>(0);
  return out;
}

void register_errors(caf::actor_system_config& cfg) {
  cfg.add_error_category(error_category,
                         [](std::uint8_t code, caf::atom_value, const caf::message& ctx) {
                           std::string out = to_string(static_cast<errc>(code));
                           if (ctx.match_elements<std::string>())
                             out += ": " + ctx.get_as<std::string>(0);
                           return out;
                         });
}

} // namespace bamboo
