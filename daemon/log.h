/* squashd logging: every line starts with "squashd: " and a level, goes to
 * stderr (journald under systemd, with sd-daemon priority prefixes). */
#ifndef SQUASHD_LOG_H
#define SQUASHD_LOG_H

#include <stdbool.h>

void log_init(bool debug);
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
