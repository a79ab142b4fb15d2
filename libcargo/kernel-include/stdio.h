/* <stdio.h> for kernels: a kernel has no files or terminal. Output goes to the caller with
 * xc_reply(ctx, data, len), and a line to the node's log with xc_log(ctx, msg); the usual
 * stdio functions are declared unavailable and say so where a port calls them. */
#ifndef XCARGO_STDIO_H
#define XCARGO_STDIO_H

#include <xcargo/kernel.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xc_no_file FILE;
#define XC_UNAVAILABLE_IO __attribute__((unavailable( \
    "a kernel has no files or terminal: xc_reply(ctx, data, len) answers the caller, xc_log(ctx, msg) logs a line")))

XC_UNAVAILABLE_IO int printf(const char *format, ...);
XC_UNAVAILABLE_IO int fprintf(FILE *f, const char *format, ...);
XC_UNAVAILABLE_IO int puts(const char *s);
XC_UNAVAILABLE_IO int putchar(int c);
XC_UNAVAILABLE_IO int fputs(const char *s, FILE *f);
XC_UNAVAILABLE_IO FILE *fopen(const char *path, const char *mode);
XC_UNAVAILABLE_IO size_t fread(void *p, size_t size, size_t n, FILE *f);
XC_UNAVAILABLE_IO size_t fwrite(const void *p, size_t size, size_t n, FILE *f);
XC_UNAVAILABLE_IO int fclose(FILE *f);
XC_UNAVAILABLE_IO extern FILE *stdin, *stdout, *stderr;
#define XC_UNAVAILABLE_FORMAT __attribute__((unavailable( \
    "no formatted printing in kernels: reply raw values (xc_reply) and format them in the client")))
XC_UNAVAILABLE_FORMAT int snprintf(char *s, size_t n, const char *format, ...);
XC_UNAVAILABLE_FORMAT int sprintf(char *s, const char *format, ...);
#undef XC_UNAVAILABLE_FORMAT

#undef XC_UNAVAILABLE_IO

#ifdef __cplusplus
}
#endif

#endif /* XCARGO_STDIO_H */
