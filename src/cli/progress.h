/* progress.h: a one-line progress display on a terminal, sized to its width (never wrapping), and
 * the seconds clock the displays use. */
#ifndef GRAFT_CLI_PROGRESS_H
#define GRAFT_CLI_PROGRESS_H

/* Monotonic seconds. */
double progress_now(void);
/* Seconds since this process started (the kernel's start time, 10 ms steps); -1 if unknown. */
double progress_since_exec(void);
/* The terminal's width in columns (TIOCGWINSZ on stdout; 80 when it does not say). */
int progress_columns(void);
/* Fit "PREFIX [####    ] SUFFIX" into `columns` - 1 characters: the bar takes what is left (at
 * most 40 wide, left out below 5) and the line is cut at the width. out gets the text. */
void progress_format(char *out, int size, int columns, const char *prefix, double fraction,
                     const char *suffix);
/* Redraw the line in place on stdout ("\r", the text, clear to the end of the line). */
void progress_show(const char *prefix, double fraction, const char *suffix);
/* Clear the line (before ordinary output follows). */
void progress_clear(void);

#endif
