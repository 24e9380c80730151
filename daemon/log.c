#include "config.h"

#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-daemon.h>

static bool log_debug_enabled;
/* journald reads "<N>" priority prefixes; a terminal or file should not
 * see them. systemd sets JOURNAL_STREAM when stderr is the journal. */
static bool log_to_journal;

void log_init(bool debug)
{
	const char *js = getenv("JOURNAL_STREAM");

	log_debug_enabled = debug;
	log_to_journal = js != NULL && js[0] != '\0';
}

static void log_line(const char *prefix, const char *level, const char *fmt,
		     va_list ap)
{
	char msg[2048];
	int saved = errno; /* callers may log between a failure and %m/errno */

	vsnprintf(msg, sizeof(msg), fmt, ap);
	fprintf(stderr, "%ssquashd: %s: %s\n", log_to_journal ? prefix : "",
		level, msg);
	fflush(stderr);
	errno = saved;
}

void log_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line(SD_ERR, "error", fmt, ap);
	va_end(ap);
}

void log_warning(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line(SD_WARNING, "warning", fmt, ap);
	va_end(ap);
}

void log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line(SD_INFO, "info", fmt, ap);
	va_end(ap);
}

void log_debug(const char *fmt, ...)
{
	va_list ap;

	if (!log_debug_enabled)
		return;
	va_start(ap, fmt);
	log_line(SD_DEBUG, "debug", fmt, ap);
	va_end(ap);
}
