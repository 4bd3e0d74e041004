// render/input_checks: every string from a request or a template that reaches the domain XML is
// checked here first. pugixml escapes markup, but it cannot make a control character or broken
// UTF-8 legal XML (it writes "&#1;", which libxml2 rejects), and libvirt puts the VM name into
// file paths; so those are refused with an error naming the field, never repaired.
#pragma once

#include <string>
#include <utility>

#include "hostagent/common/result.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"

namespace hostagent::render::detail {

// The renderer's refusals, each an input the caller must fix. A placement's are prefixed so the
// message says it was the placement, not the template or the request, that was wrong.
inline Error invalid_input(std::string message) {
  return Error{ErrorCode::invalid_argument, std::move(message)};
}
inline Error invalid_placement(std::string message) {
  return Error{ErrorCode::invalid_argument, "placement: " + std::move(message)};
}

// [A-Za-z0-9_.-]{1,64}, not starting with '.', so that "." and ".." can never become a path.
Status check_vm_name(const std::string& name);

// Text allowed in XML 1.0 character data and attributes: valid UTF-8, no C0 controls but tab, LF
// and CR, no U+FFFE/U+FFFF. `what` names the field in the message.
Status check_xml_text(const std::string& what, const std::string& value);

// A metadata key becomes an element name: an ASCII XML NCName ([A-Za-z_][A-Za-z0-9._-]*, at most 64
// characters) that does not start with "xml" in any case (reserved by XML 1.0 section 2.3).
Status check_metadata_key(const std::string& key);

// An absolute path with XML-safe text and no ".." component.
Status check_absolute_path(const std::string& what, const std::string& path);

// Direct kernel boot: kernel and initrd are absolute paths, the command line one line of XML-safe
// text of at most 4096 bytes; an initrd or a command line needs a kernel (QEMU refuses -initrd
// without -kernel, and a command line without one would be silently dropped).
Status check_kernel_boot(const vmtemplates::BootSpec& boot);

}  // namespace hostagent::render::detail
