ALTER TABLE "messages" ADD COLUMN "mentions" text;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "mention_keys" text;--> statement-breakpoint
CREATE INDEX "messages_mentions_pending" ON "messages" USING btree ("room","seq") WHERE mention_keys IS NULL;