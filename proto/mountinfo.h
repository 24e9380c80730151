/* Reading /proc/PID/mountinfo lines, for both sides: the plugin's step
 * detaches what it copied from the host, squashd checks its mount points
 * and looks for other namespaces' copies of its mounts. */
#ifndef SQUASH_MOUNTINFO_H
#define SQUASH_MOUNTINFO_H

/* The mount point (field 5) of one mountinfo line, unescaped in place
 * (the kernel writes space, tab, newline and backslash as \ooo); NULL
 * when the line has fewer fields. Splits line. */
char *squash_mountinfo_mount_point(char *line);

/* Undoes mountinfo's \ooo escapes in place. */
void squash_mountinfo_unescape(char *s);

#endif
