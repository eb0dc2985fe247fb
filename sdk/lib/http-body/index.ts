/** Raw request bodies (uploads) for routes declared with rawBody. */
export * from './raw-body.js';
