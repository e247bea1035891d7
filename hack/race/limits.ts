/** MAX_PAUSE_SECONDS bounds a freeze: the flag, the page's input and the server all refuse more. */
export const MAX_PAUSE_SECONDS = 120;
