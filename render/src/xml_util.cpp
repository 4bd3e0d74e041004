// render/xml_util: serialisation of the rendered documents.
#include "xml_util.hpp"

#include <sstream>

namespace hostagent::render::detail {

std::string to_text(const pugi::xml_document& doc, unsigned int flags) {
  std::ostringstream out;
  doc.save(out, "  ", pugi::format_indent | pugi::format_no_declaration | flags, pugi::encoding_utf8);
  return out.str();
}

}  // namespace hostagent::render::detail
