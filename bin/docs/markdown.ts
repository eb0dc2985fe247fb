/** Text that must stay inside one cell of a markdown table. */
export const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
