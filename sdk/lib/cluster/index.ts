/** What families share about clusters: objects each member holds a part of. */
export * from './member-parts.js';
