/*
 * a11y_sdstub.c - for static links only: Debian's libdbus-1.a refers to sd_listen_fds and
 * sd_is_socket (libsystemd) from _dbus_listen_systemd_sockets, a server listening on sockets
 * systemd passed it. A client never calls it, and Debian ships no libsystemd.a; these say "no
 * sockets passed", which is what a client process has.
 */
#include <errno.h>

int sd_listen_fds(int unset_environment);
int sd_is_socket(int fd, int family, int type, int listening);

int
sd_listen_fds(int unset_environment)
{
    (void)unset_environment;
    return 0;
}

int
sd_is_socket(int fd, int family, int type, int listening)
{
    (void)fd;
    (void)family;
    (void)type;
    (void)listening;
    return -ENOSYS;
}
