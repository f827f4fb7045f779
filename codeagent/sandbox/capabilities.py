"""The Linux capabilities a sandbox container (and every container codeagent builds in) keeps."""

# Capabilities kept from Docker's default set; everything else is dropped. Root in the sandbox
# must still install and build what tasks need: CHOWN, FOWNER, FSETID and DAC_OVERRIDE for apt,
# dpkg, pip, tar and `chown` in the harness's images (DAC_OVERRIDE also lets root open the 0600
# FIFOs of a non-root host user), SETUID/SETGID for apt's _apt user and `su` in test scripts, KILL
# to kill process trees of any uid (our kill-tree script), NET_BIND_SERVICE for tests that serve
# on a low port of the loopback. Dropped: MKNOD, NET_RAW, SETFCAP, SETPCAP, SYS_CHROOT,
# AUDIT_WRITE. With no-new-privileges and no writable host path, a setuid file made inside
# cannot matter outside.
CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "KILL", "NET_BIND_SERVICE"]
