// A cluster snapshot as one line of JSON (bamboo-inspect --json and --watch):
// what scripts and tests read, field for field.
#pragma once

#include <string>

#include "schema/codec.hpp"

namespace bamboo::app {

std::string to_json(const schema::cluster_snapshot& s);
std::string to_json(const schema::cluster_event& e);
std::string json_string(const std::string& text); // quoted and escaped

} // namespace bamboo::app
