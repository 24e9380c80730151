/* UTF-8, decoded once for everything that checks text: image metadata,
 * catalog names, JSON strings (proto/) and squashd's log lines and
 * squashctl's JSON (daemon/util/utf8.h). */
#ifndef SQUASH_UTF8_TEXT_H
#define SQUASH_UTF8_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* Length (1-4) of the valid UTF-8 sequence at p, reading at most n bytes,
 * or 0 when p starts none there (overlong forms, surrogates, code points
 * above U+10FFFF and sequences cut short are invalid, RFC 3629). *cp gets
 * the code point. */
size_t squash_utf8_sequence(const unsigned char *p, size_t n, uint32_t *cp);

/* The same for a printable character past ASCII: 0 also for a C1 control
 * (U+0080-U+009F), which a terminal may obey like an escape. */
size_t squash_utf8_printable(const unsigned char *p, size_t n);

#endif
