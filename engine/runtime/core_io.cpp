#include "core_io.hpp"

namespace tern::rt {

template class CoreIoFor<proto::HostCore, proto::OutDatagram>;
template class CoreIoFor<proto::kcp::KcpCore, proto::kcp::KcpDatagram>;

}  // namespace tern::rt
