package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nudgehq/nudge/internal/provider/ses"
	snsprovider "github.com/nudgehq/nudge/internal/provider/sns"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	sestypes "github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/nudgehq/nudge/internal/deployment"
)

// TemplatesDir is the repository's templates/email folder, found from the
// working directory (as standin.DefaultDir finds the module's root).
func TemplatesDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "templates", "email")); err == nil {
				return filepath.Join(d, "templates", "email"), nil
			}
		}
		if filepath.Dir(d) == d {
			return "", errors.New("local: no templates/email folder above the working directory; run from the repository")
		}
	}
}

// ProvisionEmail creates the stage's e-mail templates from dir in the SES
// stand-in, as the stack deploys them (named with the stage's prefix). A
// template that exists is updated, so that an edited file shows in the
// next demo.
func ProvisionEmail(ctx context.Context, s deployment.Stage, client *sesv2.Client, dir string) ([]ses.Template, error) {
	templates, err := ses.ReadTemplates(os.DirFS(dir))
	if err != nil {
		return nil, err
	}
	for _, t := range templates {
		content := &sestypes.EmailTemplateContent{Subject: aws.String(t.Subject)}
		if t.HTML != "" {
			content.Html = aws.String(t.HTML)
		}
		if t.Text != "" {
			content.Text = aws.String(t.Text)
		}
		name := aws.String(ses.TemplatePrefix(s.Name) + t.Name)
		_, err := client.CreateEmailTemplate(ctx, &sesv2.CreateEmailTemplateInput{TemplateName: name, TemplateContent: content})
		if err != nil && isAlreadyExists(err) {
			_, err = client.UpdateEmailTemplate(ctx, &sesv2.UpdateEmailTemplateInput{TemplateName: name, TemplateContent: content})
		}
		if err != nil {
			return nil, fmt.Errorf("local: SES template %s: %w", t.Name, err)
		}
	}
	return templates, nil
}

// isAlreadyExists recognises the SES stand-in's answer for a template that
// exists (a 400 whose code the SDK does not read from its body).
func isAlreadyExists(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && (api.ErrorCode() == "AlreadyExistsException" || api.ErrorMessage() == "The resource specified in your request already exists.")
}

// Topic is the stage's delivery topic on the SNS stand-in and the queue
// subscribed to it, which stands for the team's own senders: what reaches
// it is what SNS delivered.
type Topic struct {
	ARN      string
	QueueURL string
}

// ProvisionTopic creates the stage's delivery topic and a queue subscribed
// to it with raw message delivery.
func ProvisionTopic(ctx context.Context, s deployment.Stage, topics *sns.Client, q *sqs.Client) (Topic, error) {
	return provisionTopic(ctx, snsprovider.TopicName(s.Name), topics, q)
}

// OperatorsTopicName is the local operators' topic of stage s: the topic
// the outcomes function tells of escalations, as a stage's
// -c operatorsTopicArn names one in AWS.
func OperatorsTopicName(s deployment.Stage) string { return "nudge-" + s.Name + "-operators" }

// ProvisionOperatorsTopic creates stage s's operators' topic in fauxqs's
// SNS and a queue subscribed to it (raw delivery), where what it was told
// can be read.
func ProvisionOperatorsTopic(ctx context.Context, s deployment.Stage, topics *sns.Client, q *sqs.Client) (Topic, error) {
	return provisionTopic(ctx, OperatorsTopicName(s), topics, q)
}

// provisionTopic creates the topic called topic and its subscriber queue.
func provisionTopic(ctx context.Context, topic string, topics *sns.Client, q *sqs.Client) (Topic, error) {
	t, err := topics.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(topic)})
	if err != nil {
		return Topic{}, fmt.Errorf("local: create topic %s: %w", topic, err)
	}
	name := topic + "-subscriber"
	out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		return Topic{}, fmt.Errorf("local: create %s: %w", name, err)
	}
	a, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		return Topic{}, err
	}
	if _, err := topics.Subscribe(ctx, &sns.SubscribeInput{TopicArn: t.TopicArn, Protocol: aws.String("sqs"),
		Endpoint: aws.String(a.Attributes[string(types.QueueAttributeNameQueueArn)]), Attributes: map[string]string{"RawMessageDelivery": "true"}}); err != nil {
		return Topic{}, fmt.Errorf("local: subscribe %s to %s: %w", name, topic, err)
	}
	return Topic{ARN: aws.ToString(t.TopicArn), QueueURL: aws.ToString(out.QueueUrl)}, nil
}
