// state/metadata_xml: namespace resolution over pugixml names.
#include "metadata_xml.hpp"

#include "hostagent/state/vm_record.hpp"

namespace hostagent::state::detail {

std::string_view local_name(pugi::xml_node element) {
  const std::string_view name = element.name();
  const auto colon = name.find(':');
  return colon == std::string_view::npos ? name : name.substr(colon + 1);
}

std::string_view prefix_of(pugi::xml_node element) {
  const std::string_view name = element.name();
  const auto colon = name.find(':');
  return colon == std::string_view::npos ? std::string_view() : name.substr(0, colon);
}

std::string_view namespace_of(pugi::xml_node element) {
  const std::string_view prefix = prefix_of(element);
  const std::string declaration = prefix.empty() ? "xmlns" : "xmlns:" + std::string(prefix);
  // The nearest declaration in scope wins (Namespaces in XML 1.0, section 6.1).
  for (auto node = element; node.type() == pugi::node_element; node = node.parent()) {
    if (const auto attribute = node.attribute(declaration.c_str())) return attribute.value();
  }
  return {};
}

bool in_hostagent_namespace(pugi::xml_node element) {
  return namespace_of(element) == kMetadataNamespace;
}

pugi::xml_node hostagent_child(pugi::xml_node parent, std::string_view local) {
  for (const auto child : parent.children()) {
    if (child.type() == pugi::node_element && local_name(child) == local && in_hostagent_namespace(child)) {
      return child;
    }
  }
  return {};
}

pugi::xml_node find_vm_element(const pugi::xml_document& doc) {
  const auto root = doc.document_element();
  if (in_hostagent_namespace(root)) return root;
  if (std::string_view(root.name()) != "domain") return {};
  // libvirt keeps at most one element per namespace under <metadata>, whatever its name.
  for (const auto child : root.child("metadata").children()) {
    if (child.type() == pugi::node_element && in_hostagent_namespace(child)) return child;
  }
  return {};
}

std::string name_like(pugi::xml_node parent, std::string_view local) {
  const std::string_view prefix = prefix_of(parent);
  return prefix.empty() ? std::string(local) : std::string(prefix) + ":" + std::string(local);
}

}  // namespace hostagent::state::detail
