// The collective watchdog's network probe: what the shared-file heartbeats cannot tell apart. A rank whose
// link is down (or whose node is cut off) keeps writing its heartbeat to the shared file system and waits in
// the same collective as everyone else, so a timeout report from heartbeats alone says only "every rank
// arrived, no progress". Each rank therefore listens on a TCP port (any address, a free port) and publishes
// IP:port in its heartbeat; when a collective times out, the reporting rank connects to every other rank's
// port with a short deadline. A host that answers (connection accepted, or refused because the process is
// gone) is reachable; one that stays silent or has no route is named in the report as unreachable.
// Nothing is exchanged: the kernel completes the handshake, the watchdog thread closes what it accepted.
#pragma once
#include <string>
#include <vector>

namespace cnn {

// Opens this process's listening socket (once) and returns "IP:port", IP being the first IPv4 address of an
// interface that is up and not loopback ("" when there is none or the socket cannot be opened: the report
// then says the rank could not be probed).
std::string open_probe_listener();
// Accepts and closes pending probe connections (watchdog thread, every poll).
void drain_probe_listener();

enum class ProbeResult { kReached, kSilent, kUnknown };
// Connects to every address ("" -> kUnknown) at once and waits at most `timeout_s` for the answers.
std::vector<ProbeResult> probe_peers(const std::vector<std::string>& addrs, double timeout_s);

}  // namespace cnn
