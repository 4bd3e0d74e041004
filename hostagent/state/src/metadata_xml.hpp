// state/metadata_xml: finding hostagent's element in a domain XML by namespace URI. pugixml keeps
// prefixes as part of names and knows nothing of namespaces, and libvirt may hand the element back
// under another prefix than the one written (virDomainGetMetadata declares the namespace on the
// element itself), so names are resolved here against the xmlns declarations in scope.
#pragma once

#include <pugixml.hpp>

#include <string>
#include <string_view>

namespace hostagent::state::detail {

std::string_view local_name(pugi::xml_node element);
std::string_view prefix_of(pugi::xml_node element);
// The namespace URI the element's name resolves to; "" when none is in scope.
std::string_view namespace_of(pugi::xml_node element);
bool in_hostagent_namespace(pugi::xml_node element);

// The first child element in hostagent's namespace with this local name; empty when none.
pugi::xml_node hostagent_child(pugi::xml_node parent, std::string_view local);
// hostagent's element: under <domain><metadata> in a whole domain, or the document element itself
// when that is in hostagent's namespace (virDomainGetMetadata's form). Empty when neither.
pugi::xml_node find_vm_element(const pugi::xml_document& doc);
// "prefix:local", or "local" when parent's own name has no prefix (a default namespace).
std::string name_like(pugi::xml_node parent, std::string_view local);

}  // namespace hostagent::state::detail
