// render/xml_util: thin helpers over pugixml for the two rendered documents. Values always go through
// pugixml's escaping; nothing here builds XML text by hand.
#pragma once

#include <pugixml.hpp>

#include <cstdint>
#include <string>

namespace hostagent::render::detail {

inline pugi::xml_node add(pugi::xml_node parent, const char* name) {
  return parent.append_child(name);
}

inline pugi::xml_node add_text(pugi::xml_node parent, const char* name, const std::string& text) {
  auto node = parent.append_child(name);
  node.text().set(text.c_str());
  return node;
}

inline pugi::xml_node set(pugi::xml_node node, const char* name, const std::string& value) {
  node.append_attribute(name).set_value(value.c_str());
  return node;
}

inline pugi::xml_node set(pugi::xml_node node, const char* name, const char* value) {
  node.append_attribute(name).set_value(value);
  return node;
}

inline pugi::xml_node set(pugi::xml_node node, const char* name, uint64_t value) {
  node.append_attribute(name).set_value(static_cast<unsigned long long>(value));
  return node;
}

inline pugi::xml_node set(pugi::xml_node node, const char* name, int value) {
  node.append_attribute(name).set_value(value);
  return node;
}

// The comment text is ours, never a request's: XML comments cannot escape "--".
inline void add_comment(pugi::xml_node parent, const char* text) {
  parent.append_child(pugi::node_comment).set_value(text);
}

// Serialises with two-space indentation and no XML declaration. `flags` adds pugi::format_* flags.
std::string to_text(const pugi::xml_document& doc, unsigned int flags);

}  // namespace hostagent::render::detail
