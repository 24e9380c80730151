/* User text shown back in messages: control characters never reach a
 * terminal or a log raw (they could move the cursor, recolour or forge
 * lines); they are written as \xNN, and long text is cut. */
#ifndef SQUASH_QUOTE_H
#define SQUASH_QUOTE_H

#include <stddef.h>

/* The bytes that are never shown raw: below 0x20, and DEL. */
static inline int squash_is_control(unsigned char c)
{
	return c < 0x20 || c == 0x7f;
}

/* Longest piece of user text quoted back in a message. */
#define SQUASH_QUOTE_MAX 200

/* Writes the first len bytes of s into out (always NUL-terminated when
 * outlen > 0): bytes below 0x20 and 0x7f become \xNN, a backslash stays
 * one backslash, and "..." marks where text was cut to fit. Returns out. */
char *squash_quote(char *out, size_t outlen, const char *s, size_t len);

/* squash_quote of a NUL-terminated string into a buffer big enough for a
 * quoted SQUASH_QUOTE_MAX bytes. */
#define SQUASH_QUOTE_BUF (SQUASH_QUOTE_MAX * 4 + 4)

#endif
